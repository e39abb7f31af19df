/**
 * Credentials, as values (no I/O): the API, the agent and the CLI share these rules.
 *
 * - User and node tokens are `gpt_` + 32 random bytes (base64url). The database keeps only
 *   their sha256; a token is shown once, when it is made.
 * - A run token (`gpr_<runId>.<attempt>.<exp>.<mac>`) lets one job process write to its own
 *   run, for one attempt. Its node's agent derives it offline from its node token (so it never
 *   travels through Temporal and an API outage does not stop a job from starting); the API checks
 *   it with the node token's run key, which it keeps beside the hash. The attempt and the expiry
 *   (unix seconds) are under the mac: the API refuses the token once that attempt is over, is no
 *   longer its run's, or `exp` has passed (api/auth/token-resolver.ts).
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export type Role = 'admin' | 'member' | 'viewer';
export const ROLES: readonly Role[] = ['admin', 'member', 'viewer'];

const TOKEN_RE = /^gpt_[A-Za-z0-9_-]{43}$/;
// Numbers in canonical decimal (no sign, no leading zero), so a token has one spelling.
const RUN_TOKEN_RE = /^gpr_([a-z]{1,8}-[0-9a-z]{8,40})\.([1-9][0-9]{0,6})\.([1-9][0-9]{0,11})\.([A-Za-z0-9_-]{43})$/;

/**
 * How long a run token is good for at most, from when the agent derives it (when it starts the
 * attempt): 30 days. Jobs have no time limit of their own, so this is not what ends a token: the
 * end of its attempt is, checked by the API on every request. The expiry bounds a token whose
 * attempt the database never sees end (a control plane that lost track of it) and a token
 * copied out of a job's environment. A job that runs longer than this loses its run writes (the
 * SDK's calls are refused with 401); the API also refuses an `exp` further ahead than this, and
 * a day for clocks that disagree.
 */
export const RUN_TOKEN_TTL_S = 30 * 86_400;
export const RUN_TOKEN_MAX_AHEAD_S = RUN_TOKEN_TTL_S + 86_400;

/** A fresh user or node token. */
export function newToken(): string {
  return `gpt_${randomBytes(32).toString('base64url')}`;
}

export function looksLikeToken(t: string): boolean {
  return TOKEN_RE.test(t);
}

/** What the database keeps of a token. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** The key a node token's run tokens are made with (kept by the API beside the token's hash). */
export function runKeyOf(nodeToken: string): string {
  return createHash('sha256').update(`gpuplane run key\0${nodeToken}`).digest('hex');
}

/** What a run token names, and its mac (base64url), as parseRunToken reads it. */
export interface RunTokenClaims {
  runId: string;
  attempt: number;
  /** Unix seconds from which on the token is refused. */
  exp: number;
  mac: string;
}

function mac(runKey: string, runId: string, attempt: number, exp: number): Buffer {
  return createHmac('sha256', Buffer.from(runKey, 'hex')).update(`run\0${runId}\0${attempt}\0${exp}`).digest();
}

/**
 * The token the agent gives a job process for one attempt of its run (GPUPLANE_TOKEN in the
 * job's environment): good until that attempt ends, and never after `exp` (unix seconds;
 * RUN_TOKEN_TTL_S from now unless given).
 */
export function runToken(nodeToken: string, runId: string, attempt: number, exp = Math.floor(Date.now() / 1000) + RUN_TOKEN_TTL_S): string {
  const problem = idProblem('run id', runId) ?? attemptProblem(attempt) ?? (Number.isSafeInteger(exp) && exp > 0 && exp < 1e12 ? null : `exp ${exp} is not unix seconds`);
  if (problem) throw new Error(`cannot make a run token: ${problem}`);
  return `gpr_${runId}.${attempt}.${exp}.${mac(runKeyOf(nodeToken), runId, attempt, exp).toString('base64url')}`;
}

/** The claims of a run token, or null for anything else (a token of the old `gpr_<runId>.<mac>` form included). */
export function parseRunToken(t: string): RunTokenClaims | null {
  const m = RUN_TOKEN_RE.exec(t);
  if (!m) return null;
  const attempt = Number(m[2]);
  if (attemptProblem(attempt)) return null;
  return { runId: m[1], attempt, exp: Number(m[3]), mac: m[4] };
}

/** Whether the token's mac signs its run, attempt and expiry under `runKey`, in constant time. */
export function runMacValid(runKey: string, t: RunTokenClaims): boolean {
  const want = mac(runKey, t.runId, t.attempt, t.exp);
  const got = Buffer.from(t.mac, 'base64url');
  return got.length === want.length && timingSafeEqual(got, want);
}

/**
 * The ids an agent joins into file paths (job, run, checkpoint ids) and attempt numbers: they
 * come from Temporal, which a hostile process may be able to reach, so anything else is refused
 * before it touches the disk.
 */
export const ID_RE = /^[a-z]{1,8}-[0-9a-z]{8,40}$/;
export function idProblem(what: string, id: unknown): string | null {
  return typeof id === 'string' && ID_RE.test(id) ? null : `${what} ${JSON.stringify(id)?.slice(0, 80)} is not a GPUPlane id`;
}
export function attemptProblem(attempt: unknown): string | null {
  return Number.isInteger(attempt) && (attempt as number) >= 1 && (attempt as number) <= 1_000_000 ? null : `attempt ${JSON.stringify(attempt)?.slice(0, 40)} is not a positive integer`;
}
