import { Command, InvalidArgumentError } from 'commander';
import type { QuotaLineJson, QuotaListJson } from '../api-types.ts';
import { clientOf, out } from '../client-of.ts';
import { table } from '../table.ts';

function cards(v: string): number {
  if (!/^\d+$/.test(v) || Number(v) > 100000) throw new InvalidArgumentError(`${JSON.stringify(v)} is not a whole number of cards from 0 to 100000`);
  return Number(v);
}

function pool(v: string): string {
  if (!/^[A-Za-z0-9_.\-/]+=[A-Za-z0-9_.\-/]+$/.test(v)) throw new InvalidArgumentError(`${JSON.stringify(v)} is not a pool: one label pair key=value`);
  return v;
}

const at = (project: string, p?: string) => `/projects/${encodeURIComponent(project)}/quota${p ? `?pool=${encodeURIComponent(p)}` : ''}`;

/** The quota list as a table: one line a project's quota (or a project with none that holds or wants cards). */
export function renderQuotas(r: QuotaListJson): string {
  const rows = r.quotas.map((q: QuotaLineJson) => [
    q.project,
    q.pool ?? '*',
    q.gpus ?? '-',
    q.in_use,
    q.borrowed,
    `${q.queued_jobs} (${q.queued_cards} cards)`,
    q.usage_card_hours.toFixed(1),
    q.fair_share.toFixed(3),
  ]);
  return `${table(['PROJECT', 'POOL', 'QUOTA', 'IN USE', 'BORROWED', 'QUEUED', 'USAGE (card-h)', 'FAIR SHARE'], rows, {}, 'no quotas, and no project holds or wants cards')}\nusage decays with a half-life of ${r.half_life_h} h; a project within its quota goes first, then the lower usage`;
}

/** `gpuctl quota set PROJECT --gpus N [--pool k=v]`, `gpuctl quota clear PROJECT [--pool k=v]`, `gpuctl quota list`. */
export function registerQuotaCommands(program: Command): void {
  const quota = program.command('quota').description("projects' guaranteed cards and the fair-share order (set and clear: admins)");
  quota
    .command('set')
    .description("set a project's guaranteed cards, over the whole cluster or in a pool: its jobs within the quota are served before those of projects over theirs; idle cards are lent beyond it")
    .argument('<project>', 'project name (created on first use)')
    .requiredOption('--gpus <n>', 'guaranteed cards', cards)
    .option('--pool <key=value>', 'a pool: the nodes with this label (a job counts against it when its selector names the pair)', pool)
    .option('--json', 'print JSON')
    .action(async (project: string, o: { gpus: number; pool?: string; json?: boolean }, cmd: Command) => {
      const l = await clientOf(cmd).request<QuotaLineJson>('PUT', at(project), { gpus: o.gpus, ...(o.pool ? { pool: o.pool } : {}) });
      if (o.json) return out(JSON.stringify(l));
      out(`project ${l.project} is guaranteed ${l.gpus} card(s)${l.pool ? ` in pool ${l.pool}` : ''}; ${l.in_use} in use now${l.borrowed > 0 ? `, ${l.borrowed} of them borrowed` : ''}`);
    });
  quota
    .command('clear')
    .description("clear a project's quota (the whole cluster's, or a pool's): its guarantee there is 0 again")
    .argument('<project>', 'project name')
    .option('--pool <key=value>', "the pool's quota instead of the whole cluster's", pool)
    .option('--json', 'print JSON')
    .action(async (project: string, o: { pool?: string; json?: boolean }, cmd: Command) => {
      await clientOf(cmd).request<null>('DELETE', at(project, o.pool));
      if (o.json) return out(JSON.stringify({ project, pool: o.pool ?? null, cleared: true }));
      out(`project ${project} has no quota${o.pool ? ` in pool ${o.pool}` : ''} now`);
    });
  quota
    .command('list')
    .description("each project's quota, cards in use and borrowed, queued work, recent usage and fair-share factor (the projects you may read)")
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }, cmd: Command) => {
      const r = await clientOf(cmd).request<QuotaListJson>('GET', '/quotas');
      if (o.json) return out(JSON.stringify(r));
      out(renderQuotas(r));
    });
}
