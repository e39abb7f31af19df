/**
 * The process that reads a job's checkpoint folder: one per watched attempt, started by the agent
 * (scanner-client.ts), and one per retention deletion. It takes the job's user before it touches
 * anything the job wrote, so the kernel, not a path check, decides what it may read and delete:
 * a link to another tenant's folder or to /etc/shadow reads as EACCES. Being a process of its
 * own, a slow or endless walk holds nobody else, and its heap is capped (`--max-old-space-size`).
 *
 * It speaks JSON lines: its config as argv[2]; on stdout `ready` (with what the folder held
 * before the attempt's process started), `found`, `skipped`, `warn`, `final-done`, `deleted`;
 * on stdin `final` (the attempt ended: scan once more and exit). A closed stdin (the agent gone)
 * ends it.
 */
import path from 'node:path';
import readline from 'node:readline';
import { isTempName } from '../../domain/checkpoint-name.ts';
import { CheckpointWatcher, type FoundCheckpoint } from './checkpoint-watcher.ts';
import { MAX_NAMES, namesUpTo } from './watch-folder.ts';
import { snapshot, snapshotKey, TooBig } from './fingerprint.ts';
import { deleteCheckpointFiles, type DeletionEntry } from './retention.ts';

export interface RunAs {
  uid: number;
  gid: number;
}

export type ScannerConfig =
  | { mode: 'watch'; dir: string; debounceMs: number; before: Record<string, string> | null; user: RunAs | null; owner: number }
  | { mode: 'delete'; root: string; entries: DeletionEntry[]; user: RunAs | null; owner: number };

export type ScannerMessage =
  | { t: 'ready'; before: Record<string, string> }
  | { t: 'found'; c: FoundCheckpoint }
  | { t: 'skipped'; links: string[] }
  | { t: 'warn'; msg: string }
  | { t: 'final-done' }
  | { t: 'deleted'; result: Awaited<ReturnType<typeof deleteCheckpointFiles>> };

const say = (m: ScannerMessage) => new Promise<void>((resolve) => process.stdout.write(`${JSON.stringify(m)}\n`, () => resolve()));

/** Becomes the job's user: no groups, its gid, its uid (which drops every capability). */
export function become(user: RunAs | null): void {
  if (!user || process.getuid?.() !== 0) return;
  process.setgroups?.([]);
  process.setgid?.(user.gid);
  process.setuid?.(user.uid);
}

/** What `dir` holds now (name → snapshotKey): entries the watcher then leaves alone unless they change. */
function contentsOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const names = namesUpTo(dir, MAX_NAMES);
  if (names === 'too many') return out;
  for (const name of names) {
    if (isTempName(name)) continue;
    try {
      const snap = snapshot(path.join(dir, name));
      if (snap) out[name] = snapshotKey(snap);
    } catch (err) {
      if (!(err instanceof TooBig)) throw err;
    }
  }
  return out;
}

async function watchFolder(cfg: Extract<ScannerConfig, { mode: 'watch' }>): Promise<void> {
  const before = cfg.before ?? contentsOf(cfg.dir);
  const watcher = new CheckpointWatcher({
    dir: cfg.dir,
    debounceMs: cfg.debounceMs,
    before,
    owner: cfg.owner,
    onFound: (c) => say({ t: 'found', c }),
    onSkipped: (links) => void say({ t: 'skipped', links }),
    warn: (msg, err) => void say({ t: 'warn', msg: err ? `${msg}: ${(err as Error).message ?? String(err)}` : msg }),
  });
  // A folder the job has not made yet is awaited; the attempt's process need not wait for it.
  void watcher.start();
  await say({ t: 'ready', before });
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    let m: { t?: string; crashedAt?: number };
    try {
      m = JSON.parse(line) as typeof m;
    } catch {
      continue;
    }
    // The final scan reads the folder itself: it does not wait for a folder that never appeared.
    if (m.t !== 'final') continue;
    await watcher.finalScan({ crashedAt: typeof m.crashedAt === 'number' ? m.crashedAt : undefined });
    await say({ t: 'final-done' });
    break;
  }
  await watcher.close();
}

export async function main(raw: string): Promise<void> {
  const cfg = JSON.parse(raw) as ScannerConfig;
  become(cfg.user);
  if (cfg.mode === 'watch') await watchFolder(cfg);
  else await say({ t: 'deleted', result: await deleteCheckpointFiles(cfg.root, cfg.entries, cfg.owner) });
  process.exit(0);
}
