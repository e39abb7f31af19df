/**
 * Which processes of a distributed job send: rank 0 only, unless the program asks for every rank.
 *
 * A job has one run per attempt, shared by all its processes: every member of a multi-node job,
 * and every worker torchrun starts on a node. Were each to log, the run would get every point N
 * times. So under a job (GPUPLANE_RUN_ID set) a process whose global rank is above 0 gets a muted
 * run: log(), event() and finish() do nothing and nothing is sent. The rank is RANK when set
 * (torchrun sets it per worker: the global rank across nodes), else GPUPLANE_NODE_RANK (the
 * member's rank in a multi-node job), else 0. Outside a job nothing is muted: RANK may mean
 * anything there. The Python SDK's sdk/python/gpuplane/_rank.py says the same.
 */

type Env = Record<string, string | undefined>;

/**
 * processRank: this process's global rank in its job (RANK, else GPUPLANE_NODE_RANK, else 0). A
 * value that is not an integer is passed over: better a rank that logs than one that crashes.
 */
export function processRank(env: Env): number {
  for (const name of ['RANK', 'GPUPLANE_NODE_RANK']) {
    const raw = (env[name] ?? '').trim();
    if (/^\d+$/.test(raw)) return Number(raw);
  }
  return 0;
}

/** allRanksFrom: GPUPLANE_LOG_ALL_RANKS as a boolean (unset: false). */
export function allRanksFrom(env: Env): boolean {
  const raw = (env.GPUPLANE_LOG_ALL_RANKS ?? '').trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['', '0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new Error(`gpuplane: GPUPLANE_LOG_ALL_RANKS=${JSON.stringify(raw)} must be 1 or 0`);
}

/** muted: true where this process must not send: under a job, rank above 0, no opt-in. */
export function muted(env: Env, allRanks: boolean | undefined): boolean {
  if (!env.GPUPLANE_RUN_ID) return false;
  return !(allRanks ?? allRanksFrom(env)) && processRank(env) > 0;
}
