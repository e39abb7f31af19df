/** `--image REF` of submit and retry (docs/environments.md): the OCI image the job's node runs its command in, checked before anything is sent. */
import { InvalidArgumentError, Option } from 'commander';
import { imageRefProblem } from '../domain/container-image.ts';

/** The --image option of a command; `what` names the job or attempt that runs in it. */
export function imageOptionFor(what: string): Option {
  return new Option(
    '--image <ref>',
    `an OCI image (name[:tag][@digest]) ${what} runs in, through its node's container runtime (podman): placed only on a node labelled runtime=podman; its working dir, checkpoint folder and cards are given to the container (docs/environments.md)`,
  ).argParser((ref: string) => {
    const problem = imageRefProblem(ref);
    if (problem) throw new InvalidArgumentError(problem);
    return ref;
  });
}

/** The image of a request for --image: none without it. */
export function imageOption(o: { image?: string }): { image?: string } {
  return o.image ? { image: o.image } : {};
}
