import Table from 'cli-table3';
import { stripVTControlCharacters } from 'node:util';

/** No box drawing: columns apart by three spaces, as `kubectl get` and `docker ps` print them. */
const NO_BORDER = {
  top: '',
  'top-mid': '',
  'top-left': '',
  'top-right': '',
  bottom: '',
  'bottom-mid': '',
  'bottom-left': '',
  'bottom-right': '',
  left: '',
  'left-mid': '',
  mid: '',
  'mid-mid': '',
  right: '',
  'right-mid': '',
  middle: '',
};
const GAP = 3;

/**
 * One line of plain text: a job's reason or a label can carry a log's colour codes or line
 * breaks, which must not reach the terminal. Longer than `max` characters ends in "…".
 */
export function cell(v: unknown, max = Infinity): string {
  const s = stripVTControlCharacters(String(v ?? '')).replace(/[\s\u0000-\u001f\u007f-\u009f]+/g, ' ').trim();
  const chars = [...s];
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : s;
}

/**
 * A borderless, uncoloured table: a header row in capitals, then one line a row. `max` caps a
 * column's width (by header) so one long reason does not widen the whole table.
 */
/** `empty`: what a list with no rows prints instead of a lone header ("no jobs"). */
export function table(head: string[], rows: unknown[][], max: Record<string, number> = {}, empty?: string): string {
  if (rows.length === 0 && empty !== undefined) return empty;
  // Empty style lists: cli-table3 colours nothing (its defaults are a red header, grey borders).
  const t = new Table({ head, chars: NO_BORDER, style: { head: [], border: [], 'padding-left': 0, 'padding-right': GAP } });
  for (const r of rows) t.push(r.map((v, i) => cell(v, max[head[i]])));
  return t
    .toString()
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n');
}

/** `key: value` lines with the values aligned, as `kubectl describe` prints them. */
export function keyValues(pairs: [string, unknown][]): string {
  const width = Math.max(...pairs.map(([k]) => k.length)) + 2;
  return pairs.map(([k, v]) => `${`${k}:`.padEnd(width)}${cell(v) || '-'}`).join('\n');
}

/** Time since `iso`, as kubectl's AGE column: 45s, 12m, 5h, 3d. */
export function age(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 120 * 60) return `${Math.floor(s / 60)}m`;
  if (s < 48 * 3600) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}
