/** `--image REF` of submit and retry (docs/environments.md): the OCI image the job's node runs its command in, checked before anything is sent. */
import { InvalidArgumentError, type Command } from 'commander';
import { imageRefProblem } from '../domain/container-image.ts';

/** Adds --image to a command; `what` names the job or attempt that runs in it. */
export function addImageOption(c: Command, what: string): Command {
  return c.option(
    '--image <ref>',
    `an OCI image (name[:tag][@digest]) ${what} runs in, through its node's container runtime (podman): placed only on a node labelled runtime=podman; its working dir, checkpoint folder and cards are given to the container (docs/environments.md)`,
    (ref: string) => {
      const problem = imageRefProblem(ref);
      if (problem) throw new InvalidArgumentError(problem);
      return ref;
    },
  );
}

/** The image of a request for --image: none without it. */
export function imageOption(o: { image?: string }): { image?: string } {
  return o.image ? { image: o.image } : {};
}
