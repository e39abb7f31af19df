/**
 * bench/peer-channel: what the peer channel (issue 46) costs a node, at 1,000 nodes.
 *
 *   node --import tsx bench/peer-channel.ts [--nodes 1000 --k 3 --seconds 30 --procs 4 --out FILE]
 *
 * Real: every simulated node runs the agent side's own code, workers/gpu-host/peer-channel.ts
 * startPeerChannel (what a node's peer keeper runs): its UDP socket on 127.0.0.1, one signed
 * heartbeat a second to each witness (runtime/peer-packet.ts), the checks of what it hears, and
 * one HTTP peer report a second with fetch. Simulated: the nodes are `--nodes` channels spread over
 * `--procs` processes (a real node has one, in a keeper process of its own, whose idle cost of a
 * Node process is not counted here), and the API is a stub in a child process that answers each
 * report as POST /api/v1/nodes/:id/peers does (the node's key, witnesses and subjects, from
 * domain/witness-assignment.ts over all nodes and runtime/peer-packet.ts peerKey) without a
 * database. CPU per node is those processes' CPU over `--seconds`, divided by the rounds (reports)
 * done in that time, as a share of a core at one round a second; the
 * stub's CPU is printed beside it (not the real API's cost). Bytes: the HTTP bytes the stub's
 * sockets read and wrote, and the heartbeat datagrams' sizes as sent (plus 28 bytes of IPv4 and
 * UDP header each).
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { assignWitnesses } from '../domain/witness-assignment.ts';
import { encodePeerHeartbeat, peerKey } from '../runtime/peer-packet.ts';
import { startPeerChannel, type PeerChannel } from '../workers/gpu-host/peer-channel.ts';

const { values: args } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1000' },
    k: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '30' },
    out: { type: 'string', default: `bench/results/peer-channel-${new Date().toISOString().slice(0, 10)}.json` },
    procs: { type: 'string', default: '4' },
    serve: { type: 'boolean', default: false },
    sim: { type: 'boolean', default: false },
    from: { type: 'string', default: '0' },
    count: { type: 'string', default: '0' },
    api: { type: 'string', default: '' },
  },
  strict: true,
});
const N = Number(args.nodes);
const K = Number(args.k);
const ids = Array.from({ length: N }, (_, i) => `gpu-node-${String(i + 1).padStart(4, '0')}`);
const say = (s: string) => process.stdout.write(`${s}\n`);

/** The stub API (child process): answers peer reports, counts bytes, reports its CPU and what it was told. */
function serve() {
  const secret = randomBytes(32).toString('hex');
  const witnessesOf = assignWitnesses(ids, K);
  const subjectsOf = new Map<string, string[]>(ids.map((id) => [id, []]));
  for (const [subject, ws] of witnessesOf) for (const w of ws) subjectsOf.get(w)!.push(subject);
  const addr = new Map<string, string>();
  const heardAgo = new Map<string, number[]>();
  const sockets = new Set<Socket>();
  let closedRead = 0;
  let closedWritten = 0;
  let reports = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/stats') {
        let read = closedRead;
        let written = closedWritten;
        for (const s of sockets) {
          read += s.bytesRead;
          written += s.bytesWritten;
        }
        const heardBy = [...heardAgo.values()].flat();
        res.end(JSON.stringify({ read, written, reports, cpu: process.cpuUsage(), heard_within_2500ms: heardBy.filter((a) => a < 2500).length, heard_reports: heardBy.length }));
        return;
      }
      const m = /^\/api\/v1\/nodes\/([^/]+)\/peers$/.exec(req.url ?? '');
      if (!m) return void res.writeHead(404).end();
      const node = decodeURIComponent(m[1]);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { peer_addr: string; heard: { node: string; ago_ms: number }[] };
      reports++;
      addr.set(node, body.peer_addr);
      heardAgo.set(node, body.heard.map((h) => h.ago_ms));
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          key: peerKey(secret, node),
          witnesses: (witnessesOf.get(node) ?? []).map((w) => ({ node: w, peer_addr: addr.get(w) ?? null })),
          subjects: subjectsOf.get(node)!.map((s) => ({ node: s, key: peerKey(secret, s) })),
        }),
      );
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => {
      closedRead += s.bytesRead;
      closedWritten += s.bytesWritten;
      sockets.delete(s);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
}

/** A simulating process: `--count` channels from node `--from`; told 'start' and 'stop' by the bench, it answers with its CPU and ignored packets. */
async function sim() {
  const mine = ids.slice(Number(args.from), Number(args.from) + Number(args.count));
  const channels: PeerChannel[] = [];
  for (const nodeId of mine) channels.push(await startPeerChannel({ apiUrl: args.api!, nodeId, host: '127.0.0.1', port: 0, warn: (l) => process.stderr.write(`${nodeId}: ${l}\n`), agentAlive: () => true }));
  let c0 = process.cpuUsage();
  process.on('message', (m: string) => {
    if (m === 'start') c0 = process.cpuUsage();
    if (m !== 'stop') return;
    const cpu = process.cpuUsage(c0);
    const ignored = channels.map((c) => c.ignored()).reduce((a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, a[k as keyof typeof a] + b[k as keyof typeof b]])) as typeof a);
    for (const c of channels) c.stop();
    process.send!({ cpuS: (cpu.user + cpu.system) / 1e6, ignored }, () => process.exit(0));
  });
  process.send!('ready');
}

interface Stats {
  read: number;
  written: number;
  reports: number;
  cpu: NodeJS.CpuUsage;
  heard_within_2500ms: number;
  heard_reports: number;
}

async function main() {
  const load = os.loadavg();
  say(`bench/peer-channel: ${N} simulated nodes, k = ${K}, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), load average ${load.map((x) => x.toFixed(1)).join(' ')} at the start`);
  const stub = fork(fileURLToPath(import.meta.url), ['--serve', '--nodes', String(N), '--k', String(K)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve) => stub.once('message', (m: { port: number }) => resolve(m.port)));
  const apiUrl = `http://127.0.0.1:${port}`;
  const stats = async () => (await (await fetch(`${apiUrl}/stats`)).json()) as Stats;
  const procs = Number(args.procs);
  const per = Math.ceil(N / procs);
  const sims = Array.from({ length: procs }, (_, i) =>
    fork(fileURLToPath(import.meta.url), ['--sim', '--nodes', String(N), '--k', String(K), '--from', String(i * per), '--count', String(Math.max(0, Math.min(per, N - i * per))), '--api', apiUrl], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
  );
  try {
    await Promise.all(sims.map((p) => new Promise((resolve) => p.once('message', resolve))));
    // Two rounds for every node to learn its witnesses' addresses, two more for everybody to be heard.
    await new Promise((r) => setTimeout(r, 5000));
    const s0 = await stats();
    for (const p of sims) p.send('start');
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, Number(args.seconds) * 1000));
    const ends = sims.map((p) => new Promise<{ cpuS: number; ignored: Record<string, number> }>((resolve) => p.once('message', resolve)));
    for (const p of sims) p.send('stop');
    const s1 = await stats();
    const wallS = (performance.now() - t0) / 1000;
    const done = await Promise.all(ends);
    const c1 = { user: done.reduce((a, d) => a + d.cpuS, 0) * 1e6, system: 0 };
    const ignored = done.map((d) => d.ignored).reduce((a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, a[k] + b[k]])));
    // A heartbeat as sent: the longest ids of this run, a 13-digit seq.
    const datagram = encodePeerHeartbeat({ from: ids[N - 1], to: ids[N - 2], seq: Date.now() }, peerKey('x', ids[N - 1])).length;
    // Per round (a node's heartbeats and report) done, so that a machine too busy to keep every
    // node's one-second round does not read cheaper: a node does one round a second.
    const rounds = s1.reports - s0.reports;
    const cpuPerNodePct = ((c1.user + c1.system) / 1e6 / rounds) * 100;
    const httpPerNode = { sent: (s1.read - s0.read) / rounds, received: (s1.written - s0.written) / rounds };
    const udpPerNode = K * (datagram + 28);
    const stubCpuPct = ((s1.cpu.user + s1.cpu.system - s0.cpu.user - s0.cpu.system) / 1e6 / wallS) * 100;
    const result = {
      at: new Date().toISOString(),
      command: `node --import tsx bench/peer-channel.ts ${process.argv.slice(2).join(' ')}`.trim(),
      machine: { cores: os.cpus().length, cpu: os.cpus()[0]?.model, load_average_at_start: load, memory_gib: Math.round(os.totalmem() / 2 ** 30), node: process.version },
      nodes: N,
      k: K,
      seconds: wallS,
      reports_per_s: rounds / wallS,
      cpu_per_node_pct_unnormalized: ((c1.user + c1.system) / 1e6 / wallS / N) * 100,
      cpu_per_node_pct_of_core: cpuPerNodePct,
      procs,
      sim_processes_cpu_pct: ((c1.user + c1.system) / 1e6 / wallS) * 100,
      stub_api_cpu_pct: stubCpuPct,
      heartbeat_datagram_bytes: datagram,
      bytes_per_node_per_s: { udp_out: udpPerNode, udp_in: udpPerNode, http_out: httpPerNode.sent, http_in: httpPerNode.received, total: 2 * udpPerNode + httpPerNode.sent + httpPerNode.received },
      heard_within_2500ms: `${s1.heard_within_2500ms} of ${s1.heard_reports} (node, subject) pairs in the last reports`,
      ignored_packets: ignored,
      load_average_at_end: os.loadavg(),
    };
    say(`  CPU per node ${cpuPerNodePct.toFixed(3)} % of a core, per round done at one round a second (${procs} processes ${result.sim_processes_cpu_pct.toFixed(0)} % for ${N} nodes over ${wallS.toFixed(1)} s; the stub API ${stubCpuPct.toFixed(0)} %)`);
    say(`  bytes per node per second: UDP ${udpPerNode} out + ${udpPerNode} in (${K} datagrams of ${datagram} + 28 each way), HTTP report ${httpPerNode.sent.toFixed(0)} out + ${httpPerNode.received.toFixed(0)} in; total ${result.bytes_per_node_per_s.total.toFixed(0)} B/s`);
    say(`  reports ${result.reports_per_s.toFixed(0)}/s (${N} would be every node's round on time); heard within 2.5 s: ${result.heard_within_2500ms}; ignored packets ${JSON.stringify(ignored)}`);
    fs.mkdirSync(path.dirname(args.out), { recursive: true });
    fs.writeFileSync(args.out, `${JSON.stringify(result, null, 2)}\n`);
    say(`written to ${args.out}`);
  } finally {
    for (const p of sims) p.kill();
    stub.kill();
  }
}

if (args.serve) serve();
else if (args.sim) void sim();
else
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
