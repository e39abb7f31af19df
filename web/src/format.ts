import type { WireValue } from './types.ts';

export function ago(iso: string | null | undefined): string {
  if (!iso) return '';
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.max(s, 0)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export const time = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '');

export function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

export function metric(v: WireValue | null | undefined): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'string') return v;
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 1e4 || Math.abs(v) < 1e-3 ? v.toExponential(3) : v.toPrecision(4);
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  let x = n;
  while (x >= 1024 && i < u.length - 1) {
    x /= 1024;
    i++;
  }
  return `${x.toFixed(i ? 1 : 0)} ${u[i]}`;
}

/** A value of any shape as one short line. */
export const show = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

/** A failure reason and its hint: the plane writes them as `reason — hint: what to do`. */
export function splitReason(reason: string | null): { reason: string; hint: string | null } {
  if (!reason) return { reason: '', hint: null };
  const i = reason.indexOf(' — hint: ');
  return i < 0 ? { reason, hint: null } : { reason: reason.slice(0, i), hint: reason.slice(i + ' — hint: '.length) };
}

/**
 * The header's "who": a token's name once, with its role only where the name does not already
 * say it, and a parenthetical such as "(first start, /root/.gpuplane)" moved to the tooltip:
 * "admin (first start, …)" with role admin reads "admin".
 */
export function whoLabel(name: string, role: string): { label: string; detail: string | null } {
  const m = /^(.*?)\s*\((.*)\)$/.exec(name);
  const short = m && m[1] ? m[1] : name;
  return { label: short === role ? short : `${short} · ${role}`, detail: m && m[1] ? m[2] : null };
}
