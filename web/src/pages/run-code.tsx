/** The code snapshot a run ran (`gpuctl submit --code`), from its system tags: hash, size, and a git checkout's commit. */
import { codeFromTags, codeLine } from '../../../domain/code-snapshot.ts';

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
