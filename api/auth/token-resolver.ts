import { timingSafeEqual } from 'node:crypto';
import type { Db } from '../../db/client.ts';
import { runAttemptNow } from '../../db/queries/auth.ts';
import { liveRunKeysOfNode, liveTokenByHash } from '../../db/queries/tokens.ts';
import { parseRunToken, RUN_TOKEN_MAX_AHEAD_S, runMacValid, tokenHash, type RunTokenClaims } from '../../runtime/tokens.ts';
import type { Principal } from './principal.ts';

export interface AuthConfig {
  /** Admin tokens that need no row (GPUPLANE_ADMIN_TOKEN): an operator's bootstrap. */
  adminTokens?: string[];
  /** How long a looked-up token is trusted before it is read again (a revocation takes this long on other replicas); a run token is read on every request. */
  cacheMs?: number;
}

/**
 * Resolves bearer tokens to principals, with a short cache (a token is read at most once per
 * cacheMs). A run token is the exception: the principal it resolves to is never cached, so its
 * attempt is read again on every request and the first request after the attempt ended is
 * refused (only a refusal is cached, as for any token).
 */
export class TokenResolver {
  private readonly cache = new Map<string, { p: Principal | null; at: number }>();
  private readonly admins: Buffer[];
  constructor(
    private readonly db: Db,
    private readonly cfg: AuthConfig,
  ) {
    this.admins = (cfg.adminTokens ?? []).filter(Boolean).map((t) => Buffer.from(tokenHash(t), 'hex'));
  }

  forget(): void {
    this.cache.clear();
    this.good.clear();
  }

  /** Tokens that resolved in the last 10 minutes: a flood of made-up tokens from their address does not lock them out. */
  private readonly good = new Map<string, number>();
  knownGood(token: string): boolean {
    const at = this.good.get(tokenHash(token));
    return at !== undefined && Date.now() - at < 600_000;
  }

  async resolve(token: string): Promise<Principal | null> {
    const hash = tokenHash(token);
    const hit = this.cache.get(hash);
    if (hit && Date.now() - hit.at < (this.cfg.cacheMs ?? 5000)) return hit.p;
    const p = await this.lookup(token, hash);
    if (this.cache.size > 10_000) this.cache.clear();
    if (p) {
      if (this.good.size > 10_000) this.good.clear();
      this.good.set(hash, Date.now());
    }
    // A run principal ends with its attempt: never kept (a run token's request reads its attempt).
    if (p?.kind !== 'run') this.cache.set(hash, { p, at: Date.now() });
    return p;
  }

  private async lookup(token: string, hash: string): Promise<Principal | null> {
    const h = Buffer.from(hash, 'hex');
    if (this.admins.some((a) => timingSafeEqual(a, h))) return { kind: 'admin', tokenId: null, name: 'GPUPLANE_ADMIN_TOKEN' };
    const run = parseRunToken(token);
    if (run) return this.lookupRun(run);
    const t = await liveTokenByHash(this.db, hash);
    if (!t) return null;
    if (t.role === 'admin') return { kind: 'admin', tokenId: t.id, name: t.name };
    if (t.role === 'node') return { kind: 'node', tokenId: t.id, name: t.name, nodeId: t.nodeId! };
    if (t.role === 'metrics') return { kind: 'metrics', tokenId: t.id, name: t.name };
    return { kind: 'user', tokenId: t.id, name: t.name, role: t.role, projects: t.projects };
  }

  /**
   * A run token is good while: its mac is right under a live token of the node its run's attempt
   * was placed on (of one of a gang's members), `exp` has not passed (nor is further ahead than a token is ever made for),
   * its attempt is the run's and the job's current one, and that attempt has not ended. Every
   * failure is the same null (a 401 that does not say which check failed).
   */
  private async lookupRun(run: RunTokenClaims): Promise<Principal | null> {
    const now = Math.floor(Date.now() / 1000);
    if (run.exp <= now || run.exp > now + RUN_TOKEN_MAX_AHEAD_S) return null;
    const a = await runAttemptNow(this.db, run.runId);
    if (!a?.nodeId || a.ended || a.attempt !== run.attempt || a.jobAttempt !== run.attempt) return null;
    // A gang's every member gets a token of its own node's making.
    for (const nodeId of a.nodeIds) {
      const keys = await liveRunKeysOfNode(this.db, nodeId);
      if (keys.some((k) => k && runMacValid(k, run))) return { kind: 'run', runId: run.runId, nodeId };
    }
    return null;
  }
}
