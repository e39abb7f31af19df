/**
 * Credentials, as values (no I/O): the API, the agent and the CLI share these rules.
 *
 * - User and node tokens are `gpt_` + 32 random bytes (base64url). The database keeps only
 *   their sha256; a token is shown once, when it is made.
 * - A run token (`gpr_<runId>.<mac>`) lets one job process write to its own run. Its node's
 *   agent derives it offline from its node token (so it never travels through Temporal and an
 *   API outage does not stop a job from starting); the API checks it with the node token's
 *   run key, which it keeps beside the hash.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export type Role = 'admin' | 'member' | 'viewer';
export const ROLES: readonly Role[] = ['admin', 'member', 'viewer'];

const TOKEN_RE = /^gpt_[A-Za-z0-9_-]{43}$/;
const RUN_TOKEN_RE = /^gpr_([a-z]{1,8}-[0-9a-z]{8,40})\.([A-Za-z0-9_-]{43})$/;

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

function mac(runKey: string, runId: string): Buffer {
  return createHmac('sha256', Buffer.from(runKey, 'hex')).update(`run\0${runId}`).digest();
}

/** The token the agent gives a job process for its run (GPUPLANE_TOKEN in the job's environment). */
export function runToken(nodeToken: string, runId: string): string {
  return `gpr_${runId}.${mac(runKeyOf(nodeToken), runId).toString('base64url')}`;
}

export function parseRunToken(t: string): { runId: string; mac: string } | null {
  const m = RUN_TOKEN_RE.exec(t);
  return m ? { runId: m[1], mac: m[2] } : null;
}

/** Whether `macB64` is the run token mac of `runId` under `runKey`, in constant time. */
export function runMacValid(runKey: string, runId: string, macB64: string): boolean {
  const want = mac(runKey, runId);
  const got = Buffer.from(macB64, 'base64url');
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
