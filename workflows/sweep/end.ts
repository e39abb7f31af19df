import type { SweepResult } from '../types.ts';
import { control } from './control.ts';
import type { SweepState } from './sweep-state.ts';

/**
 * End: every trial has a result. The sweep ends SUCCEEDED (whatever its trials' results) or
 * CANCELLED, with its counts as the reason, and the rungs not yet recorded are written with it.
 */
export async function end(sweep: SweepState): Promise<SweepResult> {
  const { sweepId, started, tally, cancelReason } = sweep;
  const state = cancelReason === undefined ? 'SUCCEEDED' : 'CANCELLED';
  const counts = `${started} trial${started === 1 ? '' : 's'}: ${tally.succeeded} succeeded, ${tally.failed} failed, ${tally.stopped} stopped by ASHA, ${tally.cancelled} cancelled`;
  await control.finishSweep({ sweepId, state, reason: cancelReason === undefined ? counts : `${cancelReason}; ${counts}`, record: sweep.unrecorded });
  return { sweepId, state, tally, started };
}
