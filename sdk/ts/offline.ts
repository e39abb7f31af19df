/**
 * The run as a local file, in the JSONL format `gpuctl import-run` reads (docs/import-jsonl.md):
 * written when the API stays away past the retry window (what finish() could not send), or for
 * the whole run in offline mode (GPUPLANE_MODE=offline). The default folder is
 * <home>/offline-runs (GPUPLANE_OFFLINE_DIR overrides): private to its user (0700, files 0600),
 * outliving the script's working folder, and one place: `gpuctl import-run <home>/offline-runs`
 * uploads every waiting run (a second import of a file stores nothing twice). The run line goes
 * first and is rewritten in place at the end (it is padded for that), so a file cut short by a
 * kill is still a valid run: `running`, which the importer records as crashed.
 */
import fs from 'node:fs';
import path from 'node:path';
import { homeOf, type Env } from './creds.ts';
import type { Item } from './outbox.ts';

const PAD = 96;

export const offlineDir = (env: Env): string => env.GPUPLANE_OFFLINE_DIR || path.join(homeOf(env), 'offline-runs');

export function offlinePath(folder: string, label: string | undefined, localId: string): string {
  const d = new Date();
  const p2 = (n: number) => String(n).padStart(2, '0');
  const stamp = `${d.getFullYear()}${p2(d.getMonth() + 1)}${p2(d.getDate())}-${p2(d.getHours())}${p2(d.getMinutes())}${p2(d.getSeconds())}`;
  const slug = (label ?? 'run').replace(/[^A-Za-z0-9_.-]+/g, '-').replace(/^[-.]+|[-.]+$/g, '').slice(0, 60) || 'run';
  return path.join(folder, `${stamp}-${slug}-${localId.slice(0, 8)}.jsonl`);
}

const shellQuote = (s: string) => (/^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);

/** The gpuctl command that uploads the file; --api only where the address was not gpuctl's default. */
export const uploadCommand = (file: string, apiUrl: string | null): string => `gpuctl${apiUrl ? ` --api ${shellQuote(apiUrl)}` : ''} import-run ${shellQuote(file)}`;

export class OfflineFile {
  points = 0;
  events = 0;
  private readonly fd: number;
  private readonly room: number;
  private open = true;

  constructor(
    readonly path: string,
    private readonly run: Record<string, unknown>,
  ) {
    const folder = path.substring(0, path.lastIndexOf('/')) || '.';
    fs.mkdirSync(folder, { recursive: true, mode: 0o700 });
    try {
      fs.chmodSync(folder, 0o700);
    } catch {
      // not ours to change: the file itself is 0600
    }
    const first = this.runJson('running', null);
    this.room = first.length + PAD;
    this.fd = fs.openSync(path, 'wx', 0o600);
    fs.writeSync(this.fd, `${first.padEnd(this.room)}\n`);
  }

  private runJson(status: string, endedMs: number | null): string {
    return JSON.stringify({ type: 'run', ...this.run, status, ...(endedMs === null ? {} : { ended_at: endedMs }) });
  }

  /** Writes outbox items (metric batches and events) as JSONL lines. */
  write(items: Item[]): void {
    const out: string[] = [];
    for (const item of items) {
      if (item.kind === 'metrics') {
        for (const p of (JSON.parse(item.body) as { points: Record<string, unknown>[] }).points) out.push(JSON.stringify({ type: 'metric', ...p }));
        this.points += item.points;
      } else {
        out.push(JSON.stringify({ type: 'event', ...(JSON.parse(item.body) as Record<string, unknown>), ...(item.ts === undefined ? {} : { ts: item.ts }) }));
        this.events++;
      }
    }
    if (out.length) fs.writeSync(this.fd, `${out.join('\n')}\n`);
  }

  close(status: string): void {
    if (!this.open) return;
    this.open = false;
    const line = this.runJson(status, Date.now());
    if (line.length <= this.room) {
      fs.writeSync(this.fd, line.padEnd(this.room), 0);
      fs.closeSync(this.fd);
      return;
    }
    fs.closeSync(this.fd);
    const text = fs.readFileSync(this.path, 'utf8');
    const tmp = `${this.path}.tmp`;
    fs.writeFileSync(tmp, `${line}\n${text.slice(text.indexOf('\n') + 1)}`, { mode: 0o600 });
    fs.renameSync(tmp, this.path);
  }
}
