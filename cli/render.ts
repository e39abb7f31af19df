/** What `gpuctl jobs`, `gpuctl job ID` and `gpuctl nodes` print for people; `--json` prints everything. */
import type { JobDetailJson, JobJson, NodeJson } from './client.ts';
import { codeLine } from '../domain/code-snapshot.ts';
import { formatMemoryMb } from '../domain/memory-limit.ts';
import { DEFAULT_WITNESS_SETTINGS } from '../domain/peer-witness.ts';
import { isQuarantine, shortDrainReason } from '../domain/quarantine.ts';
import { shellJoin } from '../domain/shell-quote.ts';
import { age, keyValues, table } from './table.ts';

const REASON_WIDTH = 40;
/** Enough for a script and its first flags (`python train.py --lr 3e-4 …`); `gpuctl job ID` prints all of it. */
const COMMAND_WIDTH = 30;
const cards = (indices: number[] | null) => (indices ?? []).join(',');
const pairs = (o: Record<string, unknown>) =>
  Object.entries(o)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');

/** A job that has not started: its reason says why it waits (for a QUEUED job the API works it out for each answer). */
const waiting = (j: JobJson) => j.state === 'CREATED' || j.state === 'QUEUED';

export function renderJobs(jobs: JobJson[], now = Date.now()): string {
  return table(
    ['ID', 'TYPE', 'STATE', 'PROJECT', 'ATT', 'GPUS', 'PRIO', 'NODE', 'CARDS', 'AGE', 'COMMAND', 'REASON'],
    // An EVALUATE job without a reason says which checkpoint it evaluates.
    jobs.map((j) => [
      j.id,
      j.type,
      // A stalled job is RUNNING all the same: the badge says it may be hung.
      j.stalled_at ? `${j.state} (stalled)` : j.state,
      j.project ?? '',
      j.attempt,
      j.nodes > 1 ? `${j.nodes}×${j.gpus}` : j.gpus,
      j.priority,
      // A gang: every member's node, and its cards in the same order.
      j.members ? j.members.map((m) => m.node_id).join(',') : (j.node_id ?? ''),
      j.members ? j.members.map((m) => cards(m.gpu_indices)).join(' ') : cards(j.gpu_indices),
      age(j.created_at, now),
      shellJoin(j.command),
      j.reason ?? (j.checkpoint_id ? `evaluates ${j.checkpoint_id}` : ''),
    ]),
    // A waiting job's reason (why it waits) is printed whole: it is short, and cut it says nothing.
    { PROJECT: 16, NODE: 24, COMMAND: COMMAND_WIDTH, REASON: Math.max(REASON_WIDTH, ...jobs.map((j) => (waiting(j) ? [...(j.reason ?? '')].length : 0))) },
    'no jobs',
  );
}

/** The line `gpuctl submit` writes to stderr for a job that no ONLINE node could take, or null. */
export function submitWarning(j: JobJson): string | null {
  // A reason on a job that has not started is why it waits: the API sets it at submit.
  if (!j.reason || (j.state !== 'CREATED' && j.state !== 'QUEUED')) return null;
  return `gpuctl: warning: ${j.id} stays queued until a node can take it: ${j.reason}`;
}

/** A `key: value` block, then the attempts (each with its run), then the state history. */
export function renderJob(j: JobDetailJson): string {
  // The newest attempt that wrote a log: a queued retry has none yet, and its predecessor's is the
  // one to read. The log lives in the API (log_path is a file on the node), so say how to read it.
  const logged = [...j.attempts].reverse().find((a) => a.log_path)?.attempt;
  const log = logged === undefined ? undefined : `gpuctl logs ${j.id}${logged === j.attempt ? '' : ` --attempt ${logged}`}`;
  const params = (j.params ?? {}) as Record<string, unknown>;
  const block = keyValues([
    ['id', j.id],
    ['type', j.type],
    ['state', j.stalled_at ? `${j.state}, stalled since ${j.stalled_at} (no metric, no log output, cards idle)` : j.state],
    ['attempt', j.attempt],
    ['command', shellJoin(j.command)],
    ['working_dir', j.working_dir],
    ['code', j.code ? codeLine(j.code) : null],
    ['image', j.image ? `${j.image} (run by its node's podman)` : null],
    ['python_env', j.python_env ? `${j.python_env.kind} ${j.python_env.sha256.slice(0, 12)} (${j.python_env.bytes} bytes), built by its node with uv` : null],
    ['gpus', j.nodes > 1 ? `${j.gpus} on each of ${j.nodes} nodes${j.members ? `: ${j.members.map((m) => `${m.node_id} [${cards(m.gpu_indices)}]`).join(', ')}` : ''}` : `${j.gpus}${j.gpu_indices ? ` on ${j.node_id} [${cards(j.gpu_indices)}]` : ''}`],
    ['memory', j.memory_mb == null ? 'no limit' : `${formatMemoryMb(j.memory_mb)} on each node (memory_mb ${j.memory_mb})`],
    ['selector', pairs(j.selector)],
    ['params', pairs(params)],
    ['priority', j.priority],
    ['exit', j.exit_code ?? j.signal],
    ['reason', j.reason],
    ['created', j.created_at],
    ['started', j.started_at],
    ['ended', j.ended_at],
    ['log', log],
  ]);
  const attempts = table(
    ['ATTEMPT', 'RUN', 'STATE', 'NODE', 'CARDS', 'PID', 'EXIT', 'REASON', 'CHANGED'],
    j.attempts.map((a) => [
      a.attempt,
      a.run_id ?? '',
      a.state,
      a.node_id ?? '',
      cards(a.gpu_indices),
      a.pid ?? '',
      a.exit_code ?? a.signal ?? '',
      a.reason ?? '',
      a.changes.map((c) => `${c.key}: ${JSON.stringify(c.from)} → ${JSON.stringify(c.to)}`).join(', '),
    ]),
    { NODE: 24, REASON: REASON_WIDTH, CHANGED: REASON_WIDTH },
  );
  // A gang's members, attempt by attempt: each one's node, cards, pid and start.
  const gangs = j.attempts.filter((a) => a.members);
  const members = gangs.length
    ? `\n\n${table(
        ['ATTEMPT', 'RANK', 'NODE', 'CARDS', 'PID', 'STARTED'],
        gangs.flatMap((a) => a.members!.map((m) => [a.attempt, m.rank, m.node_id, cards(m.gpu_indices), m.pid ?? '', m.started_at ?? ''])),
        { NODE: 24 },
      )}`
    : '';
  const history = table(
    ['AT', 'ATTEMPT', 'FROM', 'TO', 'DETAIL'],
    j.history.map((h) => [h.at, h.attempt, h.from ?? '', h.to, h.detail ?? '']),
    { DETAIL: 80 },
  );
  return `${block}\n\n${attempts}${members}\n\n${history}`;
}

/**
 * Under the nodes table, a line for each quarantined node, its STATUS being cut: what it is
 * waiting for and the command that ends it; and when no other ONLINE node takes jobs, that too,
 * since every job then waits for it.
 */
export function quarantineLines(nodes: Pick<NodeJson, 'id' | 'status' | 'drained'>[]): string[] {
  const taking = nodes.filter((n) => n.status === 'ONLINE' && !n.drained).length;
  return nodes
    .filter((n) => isQuarantine(n.drained?.reason))
    .map((n) => `node ${n.id} is ${shortDrainReason(n.drained!.reason!)}${n.status === 'ONLINE' && taking === 0 ? '; no other ONLINE node takes jobs, so they all wait for it' : ''}: gpuctl node resume ${n.id} once it is fixed`);
}

export function renderNodes(nodes: NodeJson[], now = Date.now()): string {
  const notes = [...quarantineLines(nodes), ...witnessLines(nodes, now)];
  return renderNodesTable(nodes) + (notes.length ? `\n\n${notes.join('\n')}` : '');
}

/** A node's status with the peer witnesses' verdict where it matters: SUSPECT or DEAD (docs/outage-rule.md). */
function nodeStatus(n: NodeJson): string {
  const v = n.peer?.verdict;
  const base = v === 'suspect' ? `${n.status} SUSPECT` : v === 'dead' ? `${n.status} DEAD` : n.status;
  return n.drained ? `${base} (draining${n.drained.reason ? `: ${n.drained.reason}` : ''})` : base;
}

/** How long, in words short enough for a line under the table: 12 s, 5 min, 3 h. */
const span = (ms: number) => {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`;
};

/**
 * A node whose agent is gone (its peer keeper's reports say agent_alive false): since when, and
 * whether the keeper still speaks for it (its last report within dead-after) or has fallen silent too.
 */
export function agentGoneLine(peer: NonNullable<NodeJson['peer']>, now: number): string | null {
  if (peer.agent_alive !== false) return null;
  const gone = peer.agent_gone_since ? `agent gone ${span(now - Date.parse(peer.agent_gone_since))}` : 'agent gone';
  const last = peer.reported_at ? now - Date.parse(peer.reported_at) : Infinity;
  return last < DEFAULT_WITNESS_SETTINGS.deadAfterMs ? `${gone}, keeper speaking` : `${gone}, keeper silent${Number.isFinite(last) ? ` ${span(last)}` : ''}`;
}

/** One line a node with witnesses: each witness and how long ago it last heard the node; a SUSPECT or dead node's reason beneath, and an agent gone. */
function witnessLines(nodes: NodeJson[], now: number): string[] {
  const withPeers = nodes.filter((n) => n.peer && (n.peer.witnesses.length || n.peer.verdict === 'suspect' || n.peer.verdict === 'dead' || n.peer.agent_alive === false));
  if (!withPeers.length) return [];
  const ago = (iso: string) => `${Math.max(0, (now - Date.parse(iso)) / 1000).toFixed(1)} s ago`;
  const lines = ['WITNESSES (who last heard each node, by their reports)'];
  for (const n of withPeers) {
    const ws = n.peer!.witnesses.map((w) => `${w.node} ${ago(w.last_heard_at)}`).join(', ');
    lines.push(`  ${n.id}: ${ws || 'none reporting'}`);
    if (n.peer!.verdict === 'suspect' || n.peer!.verdict === 'dead') lines.push(`    ${n.peer!.verdict === 'dead' ? 'DEAD' : 'SUSPECT'}: ${n.peer!.reason ?? ''}`);
    const agent = agentGoneLine(n.peer!, now);
    if (agent) lines.push(`    ${agent}`);
    const bad = Object.entries(n.peer!.ignored_packets ?? {}).filter(([, c]) => c > 0);
    if (bad.length) lines.push(`    peer packets ignored: ${bad.map(([why, c]) => `${why} ${c}`).join(', ')}`);
  }
  return lines;
}

function renderNodesTable(nodes: NodeJson[]): string {
  return table(
    ['NODE', 'STATUS', 'ADDRESS', 'LABELS', 'CARDS', 'FREE', 'OWNERS'],
    nodes.map((n) => {
      const present = n.gpus.filter((g) => g.present);
      // One entry a job, with its cards: job-a:0,1 job-b:2.
      const owners = new Map<string, number[]>();
      // A card held by a job this token may not read is busy with no owner shown: `busy:2`.
      for (const g of present) if (g.busy) owners.set(g.owner_job_id ?? 'busy', [...(owners.get(g.owner_job_id ?? 'busy') ?? []), g.index]);
      return [
        n.id,
        nodeStatus(n),
        n.address ?? '-',
        pairs(n.labels),
        present.length,
        present.filter((g) => !g.busy).length,
        [...owners].map(([job, idx]) => `${job}:${idx.join(',')}`).join(' '),
      ];
    }),
    { NODE: 24, STATUS: 48, ADDRESS: 40, LABELS: 40, OWNERS: 60 },
    'no nodes',
  );
}
