import { Command, InvalidArgumentError, Option } from 'commander';
import { WEBHOOK_EVENTS, WEBHOOK_FORMATS, type WebhookEventName, type WebhookFormat } from '../../domain/webhooks.ts';
import type { WebhookJson } from '../api-types.ts';
import { addWebhook, listWebhooks, removeWebhook, testWebhook } from '../client-webhooks.ts';
import { clientOf, out } from '../client-of.ts';
import { age, table } from '../table.ts';

/** --events a,b,c: each one of WEBHOOK_EVENTS. */
function eventList(v: string): WebhookEventName[] {
  const names = v.split(',').map((s) => s.trim()).filter(Boolean);
  if (names.length === 0) throw new InvalidArgumentError('name at least one event');
  for (const n of names) if (!(WEBHOOK_EVENTS as readonly string[]).includes(n)) throw new InvalidArgumentError(`unknown event ${JSON.stringify(n)}; events: ${WEBHOOK_EVENTS.join(', ')}`);
  return [...new Set(names)] as WebhookEventName[];
}

/** The webhook list as a table: status columns first, the URL last (it may be long). */
export function renderWebhooks(hooks: WebhookJson[], now = Date.now()): string {
  const when = (t: string | null) => (t ? `${age(t, now)} ago` : '-');
  return table(
    ['ID', 'PROJECT', 'EVENTS', 'FORMAT', 'BACKLOG', 'LAST SUCCESS', 'LAST FAILURE', 'LAST ERROR', 'URL'],
    hooks.map((w) => [w.id, w.project ?? '*', w.events.join(','), w.format, w.backlog, when(w.last_success_at), when(w.last_failure_at), w.last_error ?? '', w.url]),
    { EVENTS: 40, 'LAST ERROR': 50, URL: 60 },
    'no webhooks',
  );
}

/** `gpuctl webhook add URL --events …`, `list`, `remove ID`, `test ID`. */
export function registerWebhookCommands(program: Command): void {
  const webhook = program.command('webhook').description('POST events to a URL as they happen: signed, in order, retried for up to 24 h (docs/webhooks.md)');
  webhook
    .command('add')
    .description('add a webhook; prints its id (and the secret made for it, once, when --secret is not given)')
    .argument('<url>', 'http(s) URL that receives the POSTs')
    .requiredOption('--events <names>', `comma-separated: ${WEBHOOK_EVENTS.join(', ')}`, eventList)
    .option('--project <name>', "only this project's events (default: every project's; admins)")
    .option('--secret <secret>', 'the key of X-GPUPlane-Signature (HMAC-SHA256, 8-256 characters); default: one is made and printed once')
    .addOption(new Option('--format <format>', 'json, or slack ({"text": ...})').choices(WEBHOOK_FORMATS).default('json'))
    .option('--json', 'print JSON')
    .action(async (url: string, o: { events: WebhookEventName[]; project?: string; secret?: string; format: WebhookFormat; json?: boolean }, cmd: Command) => {
      const w = await addWebhook(clientOf(cmd), { url, events: o.events, format: o.format, ...(o.project ? { project: o.project } : {}), ...(o.secret ? { secret: o.secret } : {}) });
      if (o.json) return out(JSON.stringify(w));
      out(`webhook ${w.id} → ${w.url} (${w.events.join(', ')}${w.project ? `, project ${w.project}` : ''})`);
      if (w.secret) out(`secret (shown once; receivers verify X-GPUPlane-Signature with it): ${w.secret}`);
    });
  webhook
    .command('list')
    .description('webhooks you may manage, with last success, last failure and backlog (events not delivered yet)')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }, cmd: Command) => {
      const hooks = await listWebhooks(clientOf(cmd));
      if (o.json) return out(JSON.stringify(hooks));
      out(renderWebhooks(hooks));
    });
  webhook
    .command('remove')
    .description('remove a webhook: nothing more is delivered to it')
    .argument('<id>', 'webhook id')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }, cmd: Command) => {
      await removeWebhook(clientOf(cmd), id);
      out(o.json ? JSON.stringify({ id, removed: true }) : `webhook ${id} removed`);
    });
  webhook
    .command('test')
    .description('POST a signed ping to the webhook now; exits 1 unless the receiver answers 2xx')
    .argument('<id>', 'webhook id')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }, cmd: Command) => {
      const r = await testWebhook(clientOf(cmd), id);
      if (o.json) out(JSON.stringify(r));
      else if (r.delivered) out(`ping ${r.delivery} delivered: HTTP ${r.status} in ${Math.round(r.ms)} ms`);
      if (!r.delivered) {
        if (!o.json) process.stderr.write(`gpuctl: ping not delivered: ${r.error}\n`);
        process.exitCode = 1;
      }
    });
}
