import type { Client } from '@temporalio/client';
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertNodeOnline } from '../db/queries/nodes.ts';
import { peerSecretOf } from '../db/queries/peers.ts';
import { jobAttempts, jobs, nodes, peerReports } from '../db/schema.ts';
import { DEFAULT_WITNESS_SETTINGS } from '../domain/peer-witness.ts';
import { peerKey } from '../runtime/peer-packet.ts';
import { startPeerVerdicts, type PeerVerdictLoop } from '../workers/control/peer-verdicts.ts';
import { until } from './support/poll.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/**
 * The peer witnesses wired in (issue 46), on PostgreSQL with the API's report route and the control
 * worker's verdict loop, agents played by this test: a witness is believed only about its own
 * subjects, one lying witness gets no node declared dead (nor a node the control plane lost,
 * while the others still hear it: SUSPECT), and a node nobody hears is dead, its attempt fenced
 * and its job workflow told. The rule's own properties are test/peer-witness.test.ts's.
 */
describe('peer reports and verdicts', () => {
  // A shorter dead-after than the default, so that each phase takes seconds, not tens of them.
  const settings = { ...DEFAULT_WITNESS_SETTINGS, deadAfterMs: 2000, heardNormallyMs: 800 };
  const ids = ['n1', 'n2', 'n3', 'n4', 'n5'];
  let t: TestApp;
  let loop: PeerVerdictLoop;
  const signals: { workflowId: string; name: string; arg: { attempt: number; nodeId: string; reason: string } }[] = [];
  const client = { workflow: { getHandle: (workflowId: string) => ({ signal: async (s: { name: string }, arg: never) => void signals.push({ workflowId, name: s.name, arg }) }) } } as unknown as Client;
  /** What each node was last told it witnesses. */
  const subjectsOf = new Map<string, string[]>();
  /** Nodes that report, and what each says of each subject (ms ago; absent: 50). */
  const reporting = new Set(ids);
  const says = new Map<string, (subject: string) => number>();
  /** Where each node says it listens (absent: 10.0.0.N:7000), and where each was last told its witnesses listen. */
  const addrOf = new Map<string, string>();
  const witnessAddrsOf = new Map<string, Map<string, string | null>>();
  /** What each node's reports say of its agent (absent: they do not say, as an agent of before). */
  const aliveOf = new Map<string, boolean>();
  let timer: NodeJS.Timeout;

  const report = (node: string, heard: { node: string; ago_ms: number }[]) =>
    t.app.inject({ method: 'POST', url: `/api/v1/nodes/${node}/peers`, payload: { peer_addr: addrOf.get(node) ?? `10.0.0.${node.slice(1)}:7000`, heard, ...(aliveOf.has(node) ? { agent_alive: aliveOf.get(node) } : {}) } });
  const verdictOf = async (id: string) => (await t.database.db.select({ v: nodes.peerVerdict, r: nodes.peerVerdictReason }).from(nodes).where(eq(nodes.id, id)))[0];

  beforeAll(async () => {
    t = await startTestApp('peer-verdicts', { temporal: false });
    for (const id of ids) await upsertNodeOnline(t.database.db, { nodeId: id, hostname: id, labels: {}, gpus: [{ index: 0, uuid: `GPU-${id}`, name: 'fake', memoryMb: 1000 }] });
    timer = setInterval(() => {
      for (const id of reporting) {
        const ago = says.get(id) ?? (() => 50);
        void report(id, (subjectsOf.get(id) ?? []).map((s) => ({ node: s, ago_ms: ago(s) }))).then((r) => {
          const a = r.json() as { subjects: { node: string }[]; witnesses: { node: string; peer_addr: string | null }[] };
          subjectsOf.set(id, a.subjects.map((s) => s.node));
          witnessAddrsOf.set(id, new Map(a.witnesses.map((w) => [w.node, w.peer_addr])));
        });
      }
    }, 200);
    loop = startPeerVerdicts({ db: t.database.db, client, settings, warn: () => undefined, info: () => undefined, everyMs: 200 });
  });
  afterAll(async () => {
    clearInterval(timer);
    loop?.stop();
    await t?.close();
  });

  it("answers each node with its key, its k witnesses and its subjects with theirs, and records nothing about a node it does not witness", async () => {
    await until('every node told its subjects', () => ids.every((id) => subjectsOf.get(id)?.length === 3));
    await until("n1's reports on its subjects recorded", async () => (await t.database.db.select().from(peerReports).where(eq(peerReports.witnessId, 'n1'))).length === 3);
    const secret = await peerSecretOf(t.database.db);
    const stranger = ids.find((n) => n !== 'n1' && !subjectsOf.get('n1')!.includes(n))!;
    const res = await report('n1', [{ node: stranger, ago_ms: 600_000 }, { node: 'n1', ago_ms: 600_000 }]);
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json() as { key: string; witnesses: { node: string; peer_addr: string }[]; subjects: { node: string; key: string }[]; ignored: string[] };
    expect(a.key).toBe(peerKey(secret, 'n1'));
    expect(a.witnesses).toHaveLength(3);
    expect(a.witnesses.every((w) => w.node !== 'n1' && w.peer_addr === `10.0.0.${w.node.slice(1)}:7000`)).toBe(true);
    expect(a.subjects.every((s) => s.key === peerKey(secret, s.node))).toBe(true);
    expect(a.ignored.sort()).toEqual([stranger, 'n1'].sort());
    const rows = await t.database.db.select().from(peerReports).where(eq(peerReports.witnessId, 'n1'));
    expect(rows.map((r) => r.subjectId).sort()).toEqual([...subjectsOf.get('n1')!].sort());
    // A node token speaks for its node only, and a malformed report is a 400 that records nothing.
    expect((await t.app.inject({ method: 'POST', url: '/api/v1/nodes/n1/peers', payload: { peer_addr: 'x', heard: [] } })).statusCode).toBe(400);
    expect((await t.app.inject({ method: 'POST', url: '/api/v1/nodes/nope/peers', payload: { peer_addr: null, heard: [] } })).statusCode).toBe(404);
  });

  it('a node that listens on a new port (its peer keeper started again) is heartbeaten there: its subjects are told the new address', async () => {
    const subjects = subjectsOf.get('n1')!;
    expect(subjects).toHaveLength(3);
    addrOf.set('n1', '10.0.0.1:7001');
    await until("n1's subjects told its new address", () => subjects.every((s) => witnessAddrsOf.get(s)?.get('n1') === '10.0.0.1:7001'), 10_000);
    addrOf.delete('n1');
    await until("n1's subjects told its old address again", () => subjects.every((s) => witnessAddrsOf.get(s)?.get('n1') === '10.0.0.1:7000'), 10_000);
  });

  it("stores what the reports say of the node's agent: gone is shown on GET /nodes with since when, a repeated gone keeps that time, alive clears it", async () => {
    type Peer = { agent_alive: boolean | null; agent_gone_since: string | null; reported_at: string | null };
    const peerOf = async (node: string) => {
      const res = await t.app.inject({ url: `/api/v1/nodes/${node}` });
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as { peer: Peer }).peer;
    };
    const listed = async (node: string) => ((await t.app.inject({ url: '/api/v1/nodes' })).json() as { nodes: { id: string; peer: Peer }[] }).nodes.find((n) => n.id === node)!.peer;
    expect(await peerOf('n2')).toMatchObject({ agent_alive: null, agent_gone_since: null });
    aliveOf.set('n2', false);
    const gone = await until("n2's agent gone", async () => {
      const p = await peerOf('n2');
      return p.agent_alive === false ? p : null;
    }, 10_000);
    expect(gone.agent_gone_since).not.toBeNull();
    expect(await listed('n2')).toMatchObject({ agent_alive: false, agent_gone_since: gone.agent_gone_since });
    // Reports go on saying it: wait for two more of them, then the time has not moved.
    const since = Date.parse(gone.agent_gone_since!);
    const later = await until('two more reports from n2', async () => {
      const p = await peerOf('n2');
      return Date.parse(p.reported_at!) > since + 400 ? p : null;
    }, 10_000);
    expect(later).toMatchObject({ agent_alive: false, agent_gone_since: gone.agent_gone_since });
    aliveOf.set('n2', true);
    const back = await until("n2's agent back", async () => {
      const p = await listed('n2');
      return p.agent_alive === true ? p : null;
    }, 10_000);
    expect(back.agent_gone_since).toBeNull();
    // A report that does not say (an agent of before) is not taken for either.
    aliveOf.delete('n2');
    await until("n2's agent not said", async () => (await peerOf('n2')).agent_alive === null, 10_000);
  });

  it('one lying witness cannot get a node declared dead: not a live one, nor one the control plane lost while the others hear it', async () => {
    const target = 'n3';
    const witnesses = ids.filter((w) => subjectsOf.get(w)?.includes(target));
    expect(witnesses).toHaveLength(3);
    const liar = witnesses[0];
    says.set(liar, (s) => (s === target ? 600_000 : 50));
    // Long enough for a dead verdict, had one witness been enough: two dead-afters of passes.
    const from = loop.passes();
    await until('two dead-afters of passes', () => loop.passes() >= from + (2 * settings.deadAfterMs) / 200, 20_000);
    expect((await verdictOf(target)).v).toBe('fine');
    // The control plane stops hearing it; the two honest witnesses still do: a partial partition.
    reporting.delete(target);
    await until('n3 SUSPECT', async () => (await verdictOf(target)).v === 'suspect', 10_000);
    const then = loop.passes();
    await until('two more dead-afters of passes', () => loop.passes() >= then + (2 * settings.deadAfterMs) / 200, 20_000);
    const v = await verdictOf(target);
    expect(v.v).toBe('suspect');
    expect(v.r).toMatch(/2 of 3 witnesses still hear it/);
    expect(signals).toEqual([]);
  });

  it("a node nobody hears is dead: its attempt is fenced, its job's workflow told, and the attempt's reports refused", async () => {
    const target = 'n3';
    const submitted = await t.app.inject({ method: 'POST', url: '/api/v1/jobs', payload: { command: ['python', 'train.py'], working_dir: '/data' } });
    expect(submitted.statusCode, submitted.body).toBe(201);
    const jobId = (submitted.json() as { id: string }).id;
    await t.database.db.update(jobs).set({ state: 'RUNNING', nodeId: target }).where(eq(jobs.id, jobId));
    await t.database.db.update(jobAttempts).set({ nodeId: target }).where(eq(jobAttempts.jobId, jobId));
    const silentSince = Date.now();
    for (const w of ids) says.set(w, (s) => (s === target ? Date.now() - silentSince + 2000 : 50));
    await until('n3 dead', async () => (await verdictOf(target)).v === 'dead', 10_000);
    // Dead takes 2 of its 3 witnesses (witnessesNeeded): the third one's report may come a pass later.
    expect((await verdictOf(target)).r).toMatch(/[23] of 3 witnesses have not heard it/);
    await until('the signal', () => signals.length > 0, 5000);
    expect(signals[0]).toMatchObject({ workflowId: `job/${jobId}`, name: 'nodeDeclaredDead', arg: { attempt: 1, nodeId: target } });
    const [a] = await t.database.db.select({ fencedAt: jobAttempts.fencedAt }).from(jobAttempts).where(eq(jobAttempts.jobId, jobId));
    expect(a.fencedAt).not.toBeNull();
    const started = await t.app.inject({ method: 'POST', url: `/api/v1/jobs/${jobId}/attempts/1/started`, payload: { pid: 123, log_path: '/tmp/x.log' } });
    expect(started.statusCode, started.body).toBe(409);
    expect(started.json().message).toMatch(/fenced: its node was declared dead/);
    // The other nodes are fine, and a dead node takes nothing new (node-rooms.ts).
    const others = await t.database.db.execute(sql`select count(*)::int as n from nodes where peer_verdict = 'fine'`);
    expect((others as unknown as { rows: { n: number }[] }).rows[0].n).toBe(4);
  });
});
