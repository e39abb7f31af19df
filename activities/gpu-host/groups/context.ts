import type { GpuHostDeps } from '../deps.ts';
import { AllowedRoots } from '../allowed-roots.ts';

/**
 * What each group of GPU-host activities is built from (as activities/control/context.ts is for
 * the control groups): the agent's deps, and the allowed roots, resolved once, that both starting
 * an attempt and deleting checkpoints confine their paths to.
 */
export interface GpuHostContext {
  deps: GpuHostDeps;
  /** Null: attempts may work anywhere (no --allowed-root). */
  roots: AllowedRoots | null;
}

/** The context of one agent's activities. */
export function gpuHostContext(deps: GpuHostDeps): GpuHostContext {
  return { deps, roots: AllowedRoots.of(deps.allowedRoots) };
}
