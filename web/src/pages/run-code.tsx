/** The code snapshot a run ran (`gpuctl submit --code`), from its system tags: hash, size, and a git checkout's commit; and the image it ran in. */
import { codeFromTags, codeLine } from '../../../domain/code-snapshot.ts';
import { IMAGE_TAG } from '../../../domain/container-image.ts';

/** The container image the run's attempt ran in (`gpuctl submit --image`), from its system tag. */
export function RunImage({ tags }: { tags: Record<string, string> }) {
  const image = tags[IMAGE_TAG];
  if (!image) return null;
  return (
    <p data-testid="run-image">
      Image: <code>{image}</code> <span class="muted">(run by its node's podman)</span>
    </p>
  );
}

export function RunCode({ tags }: { tags: Record<string, string> }) {
  const code = codeFromTags(tags);
  if (!code) return null;
  return (
    <p data-testid="run-code" title={`sha256 ${code.sha256}${code.git ? `, git commit ${code.git.commit}` : ''}`}>
      Code: {codeLine(code)}
      {code.git?.dirty ? ': files differed from the commit' : ''}
    </p>
  );
}
