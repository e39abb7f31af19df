/** `gpuctl node envs NODE`: what a node's cache of Python environments holds, in a table. */
import { formatBytes } from '../domain/env-cache.ts';
import type { NodeEnvsJson } from './api-types.ts';
import { table } from './table.ts';

/** `2026-12-07 13:44:23`: a time in UTC, to the second. */
const when = (iso: string | null) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '') : '-');

export function renderNodeEnvs(r: NodeEnvsJson): string {
  if (r.reported_at === null) return `node ${r.node_id}: its agent has not reported its Python environments (not started since it could, or started without a node token)`;
  const head = `node ${r.node_id}: ${r.envs.length} Python environment(s), ${formatBytes(r.total_bytes)} of ${formatBytes(r.bound_bytes ?? 0)} (--env-cache-size), reported ${when(r.reported_at)} UTC; least recently used first (evicted first, unless in use)`;
  const rows = r.envs.map((e) => [e.key.slice(0, 12), e.kind, e.sha256.slice(0, 12), formatBytes(e.bytes), when(e.built_at), when(e.last_used_at), e.in_use]);
  return `${head}\n\n${table(['KEY', 'KIND', 'SHA256', 'SIZE', 'BUILT', 'LAST USED', 'IN USE'], rows, {}, 'no environments')}`;
}
