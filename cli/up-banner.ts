import { isQuarantine, shortDrainReason } from '../domain/quarantine.ts';
import { shellJoin } from '../domain/shell-quote.ts';
import type { PrivateAddressPolicy } from '../domain/webhooks.ts';

/**
 * The banner's console line. The link that signs in as admin carries the token, so it is printed
 * only to a terminal; elsewhere the line says where the token is kept (`tokenFile`, or the
 * GPUPLANE_ADMIN_TOKEN variable when null) and links without it.
 */
export function consoleLine(apiUrl: string, token: string | null, tokenFile: string | null, onTerminal: boolean): string {
  const kept = tokenFile ? `in ${tokenFile}` : 'in GPUPLANE_ADMIN_TOKEN';
  if (!token) return `${apiUrl}/   (sign in with an admin token)`;
  if (onTerminal) return `${apiUrl}/?token=${token}   (signs you in as admin; the token is also ${kept})`;
  return `${apiUrl}/   (sign in with the admin token kept ${kept}; stdout is not a terminal, so it is not printed)`;
}

/**
 * The banner's last lines: a command to try, on a line of its own so it copies whole, then how to
 * stop. It names gpuctl as it runs from any folder: `gpuctl` where the one on PATH is this
 * checkout's (`npm link`), else node with the script's absolute path. `script` is this checkout's
 * gpuctl.mjs and `onPath` the file `gpuctl` on PATH runs (links followed), or null without one.
 */
export function tryLines(script: string, onPath: string | null, example: string): string[] {
  const gpuctl = onPath === script ? 'gpuctl' : `node ${shellJoin([script])}`;
  return ['Try:', `  ${gpuctl} submit --gpus 1 -- ${example}`, 'Ctrl-C stops everything.'];
}

/**
 * The banner's line of local nodes (`gpuctl up --fake-nodes N`): their ids, the first and last
 * alone past three, and the cards each has, with where they come from (`fake`, `nvidia-smi`).
 */
export function nodesLine(ids: string[], cards: number, source: string): string {
  const count = `${cards} card${cards === 1 ? '' : 's'}`;
  if (ids.length === 1) return `${ids[0]}: ${count} (${source})`;
  const names = ids.length <= 3 ? ids.join(', ') : `${ids[0]} … ${ids[ids.length - 1]} (${ids.length} nodes)`;
  return `${names}: ${count} each (${source})`;
}

/**
 * The banner's line of its local nodes that are quarantined (domain/quarantine.ts): kept across
 * restarts, such a node takes no job, and a plane of one node runs nothing, until it is resumed.
 * null when none is.
 */
export function quarantinedLine(nodes: { id: string; drainReason: string | null }[]): string | null {
  const q = nodes.filter((n) => isQuarantine(n.drainReason));
  if (q.length === 0) return null;
  const all = q.length === nodes.length ? `; no other node takes jobs, so they all wait for ${q.length === 1 ? 'it' : 'them'}` : '';
  return `${q.map((n) => `${n.id} (${shortDrainReason(n.drainReason!)})`).join(', ')}${all}: gpuctl node resume ${q[0].id} once it is fixed`;
}

/**
 * The banner's line of where webhooks may POST (GPUPLANE_WEBHOOK_ALLOW_PRIVATE). gpuctl up takes
 * no more than any other start, public addresses only, since loopback would let a member's webhook
 * reach Temporal's HTTP API on this machine; the line names the setting that allows a receiver here.
 */
export function webhooksLine(policy: PrivateAddressPolicy): string {
  if (policy === 'all') return 'to any address, private ones too (GPUPLANE_WEBHOOK_ALLOW_PRIVATE=all)';
  if (policy === 'loopback') return 'to public addresses and this machine (GPUPLANE_WEBHOOK_ALLOW_PRIVATE=loopback)';
  return 'to public addresses only; for a receiver on this machine start with GPUPLANE_WEBHOOK_ALLOW_PRIVATE=loopback';
}
