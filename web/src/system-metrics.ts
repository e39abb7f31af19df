/**
 * The agent's telemetry among a run's metrics: the `system/…` keys domain/telemetry.ts writes
 * (after MLflow's system metrics) go on the run page's System panel, one chart per quantity with a
 * line per card, and stay out of the training curves, where a run's eight cards would bury the
 * user's own metrics under forty charts.
 */

export const SYSTEM_PREFIX = 'system/';

export const isSystemKey = (key: string) => key.startsWith(SYSTEM_PREFIX);

/** One line of a system chart: a metric key, and what the legend calls it ("gpu 0", "node1 cpu"). */
export interface SystemLine {
  key: string;
  label: string;
}

/** One chart of the System panel: what it measures, and the lines (cards, nodes) that measure it. */
export interface SystemChart {
  /** `system/gpu.*.utilization`, `system/cpu.utilization`: the keys it draws, with * for the card. */
  id: string;
  title: string;
  lines: SystemLine[];
}

/** The charts the agent's keys make, in this order; a quantity not named here gets a chart titled by its key. */
const TITLES: Record<string, string> = {
  'gpu.*.utilization': 'GPU utilization (%)',
  'gpu.*.memory_percent': 'GPU memory used (%)',
  'gpu.*.memory_used_mb': 'GPU memory used (MB)',
  'cpu.utilization': 'CPU (% of one core, the process group)',
  'memory.rss_mb': 'Host memory RSS (MB, the process group)',
  'gpu.*.power_w': 'GPU power (W)',
  'gpu.*.temperature_c': 'GPU temperature (°C)',
};
const ORDER = Object.keys(TITLES);
/** The line of a single node's host series. */
const HOST_LABELS: Record<string, string> = { 'cpu.utilization': 'cpu', 'memory.rss_mb': 'rss' };

interface Parsed {
  /** The quantity, the card left out: `gpu.*.utilization`. */
  what: string;
  /** The gang member's rank (0 for a single-node job), and the card on its node (null: the host's). */
  rank: number;
  card: number | null;
}

/** `system/[node<r>.]gpu.<card>.<field>` or `system/[node<r>.]<name>`; null for a key that is neither. */
function parse(key: string): Parsed | null {
  if (!isSystemKey(key)) return null;
  let rest = key.slice(SYSTEM_PREFIX.length);
  let rank = 0;
  const node = /^node(\d+)\.(.+)$/.exec(rest);
  if (node) {
    rank = Number(node[1]);
    rest = node[2];
  }
  const gpu = /^gpu\.(\d+)\.(.+)$/.exec(rest);
  if (gpu) return { what: `gpu.*.${gpu[2]}`, rank, card: Number(gpu[1]) };
  return rest ? { what: rest, rank, card: null } : null;
}

/** "gpu 0"; a gang member's "rank 1 gpu 0"; the host's line "cpu", or in a gang's chart "rank 0", "rank 1". */
function labelOf(p: Parsed, gang: boolean): string {
  const rank = gang ? `rank ${p.rank}` : '';
  if (p.card !== null) return p.rank > 0 ? `${rank} gpu ${p.card}` : `gpu ${p.card}`;
  return rank || (HOST_LABELS[p.what] ?? p.what.split('.')[0]);
}

/**
 * A run's metric keys split: the training metrics (as given, in their order), and the system
 * keys as charts, each with its lines by rank, then card (numerically: gpu 10 after gpu 2).
 */
export function splitSystemKeys(keys: readonly string[]): { training: string[]; system: SystemChart[] } {
  const training: string[] = [];
  const groups = new Map<string, { key: string; p: Parsed }[]>();
  for (const key of keys) {
    const p = parse(key);
    if (!p) {
      training.push(key);
      continue;
    }
    const g = groups.get(p.what) ?? [];
    g.push({ key, p });
    groups.set(p.what, g);
  }
  const rankOf = (what: string) => (ORDER.includes(what) ? ORDER.indexOf(what) : ORDER.length);
  const system = [...groups.entries()]
    .sort(([a], [b]) => rankOf(a) - rankOf(b) || a.localeCompare(b))
    .map(([what, lines]) => ({
      id: `${SYSTEM_PREFIX}${what}`,
      title: TITLES[what] ?? `${SYSTEM_PREFIX}${what}`,
      lines: lines
        .sort((x, y) => x.p.rank - y.p.rank || (x.p.card ?? -1) - (y.p.card ?? -1))
        .map((l) => ({ key: l.key, label: labelOf(l.p, lines.some((o) => o.p.rank > 0)) })),
    }));
  return { training, system };
}
