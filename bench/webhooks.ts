/**
 * bench/webhooks: delivery latency, event → receiver, on an idle plane (docs/benchmarks.md).
 *
 *   npm run bench:webhooks [-- --events 50 --gap-ms 500 --jobs 10]
 *
 * A throwaway PostgreSQL, a Temporal dev server, the control worker and the API as their own
 * processes (the test support's cluster, one fake agent), and a loopback receiver that verifies
 * each signature. It adds `--events` job.stalled events one at a time, `--gap-ms` apart (as the
 * stall detector writes them), and measures from just before each insert to the POST reaching the
 * receiver; then it runs `--jobs` CUSTOM jobs one after another and measures from each job's
 * job.succeeded event (its row's time) to its POST. Prints p50, p95 and max of each.
 */
import { parseArgs } from 'node:util';
import { addWebhook } from '../cli/client-webhooks.ts';
import { openDatabase } from '../db/client.ts';
import { addEvent } from '../db/queries/runs.ts';
import { startCluster } from '../test/support/cluster.ts';
import { until } from '../test/support/poll.ts';
import { startSharedServices } from '../test/support/services.ts';
import { WebhookReceiver } from '../test/support/webhook-receiver.ts';

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '50' },
    'gap-ms': { type: 'string', default: '500' },
    jobs: { type: 'string', default: '10' },
  },
  strict: true,
});
const say = (s: string) => process.stdout.write(`${s}\n`);
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const line = (what: string, xs: number[]) => say(`${what}: n=${xs.length} p50 ${pct(xs, 50).toFixed(0)} ms, p95 ${pct(xs, 95).toFixed(0)} ms, max ${Math.max(...xs).toFixed(0)} ms`);

const services = await startSharedServices('bench-webhooks');
const rx = new WebhookReceiver('bench-secret');
await rx.up();
const c = await startCluster('bench-webhooks', { agents: [{ nodeId: 'b1', gpus: 1 }], env: { GPUPLANE_WEBHOOK_ALLOW_PRIVATE: 'loopback' } }, services);
const h = await openDatabase({ url: c.dbUrl, poolSize: 2 });
try {
  const hook = await addWebhook(c.client, { url: rx.url, events: ['job.stalled', 'job.succeeded'], secret: 'bench-secret' });
  // The first delivery starts the workflow's wait: not counted.
  await addEvent(h.db, { kind: 'job.stalled', message: 'warm-up' });
  await until('the warm-up', () => rx.received.length > 0, 60_000);

  const byEvent: number[] = [];
  for (let i = 0; i < Number(values.events); i++) {
    await new Promise((r) => setTimeout(r, Number(values['gap-ms'])));
    const seen = rx.received.length;
    // From just before the insert: its own commit is counted too.
    const t0 = Date.now();
    const e = await addEvent(h.db, { kind: 'job.stalled', message: `bench ${i}` });
    const got = await until(`event ${e.id}`, () => rx.received.slice(seen).find((r) => r.json.event_id === e.id), 30_000);
    byEvent.push(got.at - t0);
  }
  line('event inserted → receiver', byEvent);

  const byJob: number[] = [];
  for (let i = 0; i < Number(values.jobs); i++) {
    const j = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: ['true'] });
    await c.client.waitFor(j.id, undefined, 60_000);
    const got = await until(`job ${j.id}`, () => rx.received.find((r) => r.json.job_id === j.id && r.event === 'job.succeeded'), 30_000);
    byJob.push(got.at - Date.parse(String(got.json.at)));
  }
  if (byJob.length) line('job.succeeded (row time) → receiver', byJob);
  say(`bad signatures: ${rx.badSignatures}; webhook ${hook.id}`);
} finally {
  await h.close();
  await c.stop();
  await rx.down();
  await services.stop();
}
