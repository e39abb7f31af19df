/**
 * Keeps jobs off the control plane's own ports. Where jobs run as users of their own (an agent
 * running as root, job-users.ts), the agent puts an nftables table in the kernel that refuses
 * (TCP reset) every connection those uids open to a protected endpoint: Temporal's frontend (the
 * agent's own TEMPORAL_ADDRESS), and whatever `gpuctl agent --protect HOST:PORT` names (`gpuctl
 * up` names its database, its Temporal UI and the dev server's other ports). A job reaching
 * Temporal could signal any workflow; one reaching PostgreSQL could read every project's rows.
 *
 * A protected endpoint on this machine (a loopback or local address) is refused on every local
 * address, so binding 0.0.0.0 opens no side door; a remote one on its own address. The API stays
 * open to jobs: they report through it, with their run token.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { isIP } from 'node:net';
import dns from 'node:dns/promises';
import os from 'node:os';

export interface Endpoint {
  host: string;
  port: number;
}

/** `host:port` or `[v6]:port` → an endpoint; throws a one-line error. */
export function parseEndpoint(s: string): Endpoint {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(s.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port < 1 || port > 65535) throw new Error(`--protect: expected HOST:PORT, got "${s}"`);
  return { host: m[1] ?? m[2], port };
}

const LOOPBACK_NAMES = new Set(['localhost', 'localhost.localdomain', 'ip6-localhost']);

function isLocalAddress(addr: string): boolean {
  if (addr === '0.0.0.0' || addr === '::' || addr.startsWith('127.') || addr === '::1') return true;
  return Object.values(os.networkInterfaces()).some((list) => (list ?? []).some((i) => i.address === addr));
}

/** The nftables ruleset (`nft -f` input) that refuses `uids` every endpoint; exported for tests of its shape. */
export function guardRuleset(table: string, uids: [number, number][], local: number[], remote: { family: 'ip' | 'ip6'; addr: string; port: number }[]): string {
  const uidSet = uids.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(', ');
  const rules: string[] = [];
  if (local.length) rules.push(`meta skuid { ${uidSet} } fib daddr type local tcp dport { ${[...new Set(local)].join(', ')} } reject with tcp reset`);
  for (const r of remote) rules.push(`meta skuid { ${uidSet} } ${r.family} daddr ${r.addr} tcp dport ${r.port} reject with tcp reset`);
  // `add` then `delete` makes a table that may or may not exist go away, so a restart replaces it whole.
  return [
    `add table inet ${table}`,
    `delete table inet ${table}`,
    `table inet ${table} {`,
    '  chain out {',
    '    type filter hook output priority 0; policy accept;',
    ...rules.map((r) => `    ${r}`),
    '  }',
    '}',
    '',
  ].join('\n');
}

/**
 * The table of one node's agent: a restarted agent of the node replaces it. A name too long for
 * nft ends in a hash of the whole id, so that two nodes on one machine whose ids differ only at
 * the end (`gpuctl up --fake-nodes`: ID-1, ID-2…) never share a table, nor take each other's away.
 */
export function guardTableName(nodeId: string): string {
  const name = `gpuplane_${nodeId.replace(/[^A-Za-z0-9_]/g, '_')}`;
  return name.length <= 60 ? name : `${name.slice(0, 51)}_${createHash('sha256').update(nodeId).digest('hex').slice(0, 8)}`;
}

/**
 * Installs the guard; returns what it protects, for the agent's start line. Throws where the
 * kernel or nft cannot do it (the caller says so, loudly).
 */
export async function installPortGuard(nodeId: string, uids: [number, number][], endpoints: Endpoint[]): Promise<string> {
  const local: number[] = [];
  const remote: { family: 'ip' | 'ip6'; addr: string; port: number }[] = [];
  for (const e of endpoints) {
    const addrs = isIP(e.host) ? [e.host] : LOOPBACK_NAMES.has(e.host.toLowerCase()) ? ['127.0.0.1'] : (await dns.lookup(e.host, { all: true })).map((a) => a.address);
    for (const a of addrs) {
      if (isLocalAddress(a)) local.push(e.port);
      else remote.push({ family: isIP(a) === 6 ? 'ip6' : 'ip', addr: a, port: e.port });
    }
  }
  execFileSync('nft', ['-f', '-'], { input: guardRuleset(guardTableName(nodeId), uids, local, remote), stdio: ['pipe', 'ignore', 'pipe'] });
  return endpoints.map((e) => `${e.host}:${e.port}`).join(', ');
}

/** Takes the guard away (the agent stopped with no job left behind). */
export function removePortGuard(nodeId: string): void {
  try {
    execFileSync('nft', ['delete', 'table', 'inet', guardTableName(nodeId)], { stdio: 'ignore' });
  } catch {
    // Not there.
  }
}

/**
 * The TCP ports a process (and its children) listens on, from /proc: the embedded Temporal dev
 * server opens more than its frontend (an HTTP API, metrics, its services' own ports), each on a
 * free port it picks, and every one of them is the control plane's. Empty where /proc says nothing.
 */
export function listeningPorts(rootPid: number): number[] {
  const pids = new Set([rootPid]);
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return [];
  }
  // Children (of children): a parent's pid is field 4 of /proc/PID/stat, after the command's ")".
  for (let grew = true; grew; ) {
    grew = false;
    for (const d of entries) {
      const pid = Number(d);
      if (pids.has(pid)) continue;
      try {
        const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        if (pids.has(ppid)) {
          pids.add(pid);
          grew = true;
        }
      } catch {
        // Gone meanwhile.
      }
    }
  }
  const inodes = new Set<string>();
  for (const pid of pids) {
    try {
      for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
        try {
          const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
          if (m) inodes.add(m[1]);
        } catch {
          // Closed meanwhile.
        }
      }
    } catch {
      // Gone, or not ours to read.
    }
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = fs.readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is HEX_IP:HEX_PORT; state 0A is LISTEN; field 9 is the inode.
      if (f.length > 9 && f[3] === '0A' && inodes.has(f[9])) ports.add(parseInt(f[1].split(':')[1], 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}
