/**
 * The agent tells the control plane what its cache of Python environments holds (PUT
 * /api/v1/nodes/:id/envs, with its node token): at start and after each change, the whole list,
 * so `gpuctl node envs NODE` shows the node's own word. Changes close together make one report;
 * one that fails (the API restarting, the node not registered yet) is sent again a little later.
 */
import type { NodeEnvReport } from '../../domain/env-cache.ts';
import type { NodeEnvsBodyJson } from '../../api/schemas/node-envs.ts';

interface NodeApi {
  apiUrl: string;
  nodeId: string;
  nodeToken?: string;
}

/** How long after a failed report the next try goes. */
const RETRY_MS = 5_000;

export class EnvReporter {
  private sending = false;
  private again = false;
  private retry: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly api: NodeApi,
    private readonly read: () => NodeEnvReport,
    private readonly warn: (msg: string) => void,
  ) {}

  /** Something changed: a report goes now, or right after the one in flight. */
  changed(): void {
    if (this.stopped) return;
    if (this.sending) {
      this.again = true;
      return;
    }
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    this.sending = true;
    // After the change's own step (a build's eviction) has run: one report for the lot.
    setImmediate(() => void this.send());
  }

  stop(): void {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
  }

  private async send(): Promise<void> {
    let ok = true;
    try {
      const r = this.read();
      const body: NodeEnvsBodyJson = { bound_bytes: r.boundBytes, envs: r.envs.map((e) => ({ key: e.key, kind: e.kind, sha256: e.sha256, bytes: e.bytes, built_at: e.builtAt, last_used_at: e.lastUsedAt, in_use: e.inUse })) };
      const res = await fetch(`${this.api.apiUrl.replace(/\/$/, '')}/api/v1/nodes/${encodeURIComponent(this.api.nodeId)}/envs`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${this.api.nodeToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(15_000),
      });
      if (!res.ok && res.status !== 404) this.warn(`python envs: the API answered ${res.status} to the node's list of environments: ${(await res.text()).slice(0, 300)}`);
      // 404: the node is not registered yet (the agent's start); 5xx: the API is restarting.
      ok = res.ok || (res.status >= 400 && res.status < 500 && res.status !== 404);
    } catch {
      ok = false;
    }
    this.sending = false;
    if (this.again) {
      this.again = false;
      this.changed();
    } else if (!ok && !this.stopped) {
      this.retry = setTimeout(() => this.changed(), RETRY_MS);
      this.retry.unref();
    }
  }
}
