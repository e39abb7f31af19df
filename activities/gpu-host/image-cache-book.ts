/**
 * The images a node's agent pulled for image jobs, and their bound (issue 45,
 * docs/environments.md; `gpuctl agent --image-cache-size`). The agent writes down in its own home
 * (`<data dir>/images/<image id>.json`) each image one of its pulls put on the node: the
 * references attempts named it by, the names the pull gave it, whether the image was there before
 * (then only those names are the agent's), its size as podman says it, and, as the file's mtime,
 * when an attempt last took it or gave it back. Only recorded images count against the bound and
 * only they are removed: an image the node's operator put there (pulled, imported or tagged by
 * hand) has no record, and a name of theirs on an image of the agent's keeps the image (the
 * agent's own names go, nothing else).
 */
import fs from 'node:fs';
import path from 'node:path';
import { envsToEvict, formatBytes } from '../../domain/env-cache.ts';
import { DEFAULT_IMAGE_CACHE_BYTES } from '../../domain/image-cache.ts';
import type { Podman } from './container-run.ts';
import { lastLine, podmanSays } from './podman-says.ts';

/** A record's JSON. */
interface ImageRecord {
  /** podman's image id (64 hex digits): the record's file name. */
  id: string;
  /** The references attempts named it by (their jobs' `--image`). */
  refs: string[];
  /** The names (RepoTags) its pulls gave it: the ones an eviction takes away. */
  names: string[];
  /** Whether the agent's pull brought the image itself (false: podman had it under another name; only the agent's names are its). */
  owned: boolean;
  /** podman's Size of it: all its layers, a layer it shares with another image counted in each. */
  bytes: number;
  pulled_at: string;
}

/** A recorded image, with when an attempt last took or gave it back and how many attempts use it now. */
export interface ImageEntry extends ImageRecord {
  lastUsedAt: string;
  inUse: number;
}

/** The bound (`--image-cache-size`) and the agent's log: one line per eviction, and why an image was left. */
export interface ImageCacheBound {
  /** Default domain/image-cache.ts DEFAULT_IMAGE_CACHE_BYTES (100 GiB). */
  maxBytes?: number;
  log?: (msg: string, level: 'info' | 'warn') => void;
}

const RECORD = /^([0-9a-f]{64})\.json$/;
const ASK_MS = 60_000;
/** A removal of a many-GiB image on a slow disk. */
const RMI_MS = 600_000;

/** What podman says of image `id` now: its names and size; null where it has no such image. Throws where podman fails otherwise. */
async function inspect(podman: Podman, id: string): Promise<{ id: string; names: string[]; bytes: number } | null> {
  const r = await podmanSays(podman, ['image', 'inspect', id], ASK_MS);
  if (r.code !== 0) {
    if (/no such image|image not known/i.test(r.stderr)) return null;
    throw new Error(`podman image inspect ${id}: ${lastLine(r.stderr) || `exit code ${r.code}`}`);
  }
  const [img] = JSON.parse(r.stdout) as { Id?: string; RepoTags?: string[] | null; Size?: number }[];
  return img?.Id ? { id: img.Id, names: img.RepoTags ?? [], bytes: Number(img.Size) || 0 } : null;
}

const union = (a: readonly string[] | undefined, b: readonly string[]) => [...new Set([...(a ?? []), ...b])];

/** The images the agent pulled (one record each, in `dir`), the attempts using them, and their eviction. */
export class ImageBook {
  /** Attempts using each reference now: taken when an attempt asks for its image, given back when its process ended. */
  private readonly uses = new Map<string, number>();
  /** The eviction under way: passes run one after another. */
  private pass: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly podman: Podman,
    readonly dir: string,
    private readonly bound: ImageCacheBound = {},
  ) {}

  get maxBytes(): number {
    return this.bound.maxBytes ?? DEFAULT_IMAGE_CACHE_BYTES;
  }

  take(ref: string): void {
    this.uses.set(ref, (this.uses.get(ref) ?? 0) + 1);
    this.touch(ref);
  }

  give(ref: string): void {
    const n = (this.uses.get(ref) ?? 0) - 1;
    if (n > 0) this.uses.set(ref, n);
    else this.uses.delete(ref);
    this.touch(ref);
  }

  /** The names of each image podman holds, by id: asked before a pull, so that the names the pull gives are told from those the image had. Null where podman could not say (the pull is then not recorded, so never removed). */
  async namesNow(): Promise<Map<string, string[]> | null> {
    const r = await podmanSays(this.podman, ['images', '--format', 'json'], ASK_MS);
    try {
      if (r.code !== 0) throw new Error(lastLine(r.stderr) || `exit code ${r.code}`);
      const list = JSON.parse(r.stdout) as { Id: string; Names?: string[] | null }[];
      return new Map(list.map((i) => [i.Id, i.Names ?? []]));
    } catch (err) {
      this.bound.log?.(`images: podman images failed (${(err as Error).message}): the next pull is not recorded, so never evicted`, 'warn');
      return null;
    }
  }

  /** After the agent pulled `ref` as image `id`: its record, new or with `ref` and the names the pull gave it added; its last use is now. Never throws. */
  async recordPull(ref: string, id: string | null, before: Map<string, string[]>): Promise<void> {
    try {
      if (!id) throw new Error('podman pull printed no image id');
      const now = await inspect(this.podman, id);
      if (!now) return;
      const had = new Set(before.get(now.id) ?? []);
      const old = this.read(now.id);
      const names = union(old?.names, now.names.filter((n) => !had.has(n)));
      this.write({ id: now.id, refs: union(old?.refs, [ref]), names, owned: old ? old.owned : !before.has(now.id), bytes: now.bytes, pulled_at: old?.pulled_at ?? new Date().toISOString() });
    } catch (err) {
      this.bound.log?.(`images: ${ref} pulled but not recorded (${(err as Error).message}): it is never evicted`, 'warn');
    }
  }

  /**
   * An attempt's image the node had: where it is one the agent pulled under another reference
   * (the same image by another spelling), that reference joins its record, so the attempt's use
   * keeps it. Never throws.
   */
  async adopt(ref: string): Promise<void> {
    if (this.list().length === 0) return;
    try {
      const now = await inspect(this.podman, ref);
      const rec = now ? this.read(now.id) : null;
      if (rec && !rec.refs.includes(ref)) this.write({ ...rec, refs: [...rec.refs, ref] });
      this.touch(ref);
    } catch {
      // Not one podman can inspect (gone meanwhile): podman run pulls it again.
    }
  }

  /** The recorded images, with their last use and how many attempts use them now. */
  list(): ImageEntry[] {
    let files: string[];
    try {
      files = fs.readdirSync(this.dir);
    } catch {
      return [];
    }
    return files.flatMap((f) => {
      const id = RECORD.exec(f)?.[1];
      const rec = id ? this.read(id) : null;
      if (!rec) return [];
      const lastUsedAt = fs.statSync(this.fileOf(rec.id), { throwIfNoEntry: false })?.mtime.toISOString();
      return lastUsedAt ? [{ ...rec, lastUsedAt, inUse: this.inUse(rec) }] : [];
    });
  }

  /**
   * Evicts the least recently used of the recorded images until those left fit the bound, never
   * one an attempt uses; one podman keeps (a container of it exists, another agent's say) is
   * left and the next goes. Passes run one at a time. Returns what went; never throws.
   */
  evict(): Promise<ImageEntry[]> {
    const run = this.pass.then(() => this.evictOnce());
    this.pass = run;
    return run;
  }

  private async evictOnce(): Promise<ImageEntry[]> {
    const gone: ImageEntry[] = [];
    try {
      let entries = this.list();
      const left = new Set<string>();
      for (;;) {
        const keep = new Set([...left, ...entries.filter((e) => this.inUse(e) > 0).map((e) => e.id)]);
        // An image whose pull only named an image podman had takes no room of the agent's.
        const [next] = envsToEvict(entries.map((e) => ({ key: e.id, bytes: counted(e), lastUsedMs: Date.parse(e.lastUsedAt) })), keep, this.maxBytes);
        const e = entries.find((x) => x.id === next);
        if (!e) return gone;
        const held = entries.reduce((n, x) => n + counted(x), 0);
        const done = await this.remove(e);
        if ('kept' in done) {
          left.add(e.id);
          this.bound.log?.(`images: left ${describe(e)}, though the least recently used past the bound: ${done.kept}`, done.level);
          continue;
        }
        fs.rmSync(this.fileOf(e.id), { force: true });
        entries = entries.filter((x) => x !== e);
        gone.push(e);
        this.bound.log?.(`images: ${done.did} ${describe(e)}, the least recently used, to keep the images GPUPlane pulled within ${formatBytes(this.maxBytes)} (--image-cache-size); they held ${formatBytes(held)}`, 'info');
      }
    } catch (err) {
      this.bound.log?.(`images: eviction failed: ${(err as Error).message}`, 'warn');
      return gone;
    }
  }

  /** Takes image `e` off the node: its names, and the image where it is the agent's alone. No force: an image a container uses stays. */
  private async remove(e: ImageEntry): Promise<{ did: string } | { kept: string; level: 'info' | 'warn' }> {
    const now = await inspect(this.podman, e.id);
    if (!now) return { did: 'forgot (podman no longer has it)' };
    const ours = now.names.filter((n) => e.names.includes(n));
    const others = now.names.filter((n) => !e.names.includes(n));
    // Looked at again after the await: an attempt that asked for it meanwhile keeps it.
    if (this.inUse(e) > 0) return { kept: 'an attempt took it meanwhile', level: 'info' };
    if (!e.owned || others.length > 0) {
      const u = ours.length ? await podmanSays(this.podman, ['untag', e.id, ...ours], ASK_MS) : { code: 0, stderr: '' };
      if (u.code !== 0) return { kept: `podman untag failed: ${lastLine(u.stderr) || `exit code ${u.code}`}`, level: 'warn' };
      const why = others.length ? `named ${others.join(', ')} besides` : 'there before the agent pulled it';
      return { did: `untagged ${ours.join(', ') || '(no name of its own left)'}, keeping the image (${why})` };
    }
    const r = await podmanSays(this.podman, ['rmi', ...(ours.length ? ours : [e.id])], RMI_MS);
    if (r.code === 0) return { did: 'removed' };
    const line = lastLine(r.stderr) || `exit code ${r.code}`;
    if (/in use by a container/i.test(r.stderr)) return { kept: `podman says it is in use by a container (${line}); not forced`, level: 'info' };
    if (/no such image|image not known/i.test(r.stderr)) return { did: 'forgot (podman no longer has it)' };
    return { kept: `podman rmi failed: ${line}`, level: 'warn' };
  }

  private inUse(rec: ImageRecord): number {
    return rec.refs.reduce((n, ref) => n + (this.uses.get(ref) ?? 0), 0);
  }

  /** An attempt took or gave back `ref`: the last use of every image recorded under it is now. */
  private touch(ref: string): void {
    const now = new Date();
    for (const e of this.list()) {
      if (!e.refs.includes(ref)) continue;
      try {
        fs.utimesSync(this.fileOf(e.id), now, now);
      } catch {
        // Evicted meanwhile.
      }
    }
  }

  private fileOf(id: string): string {
    return path.join(this.dir, `${id}.json`);
  }

  private read(id: string): ImageRecord | null {
    try {
      const r = JSON.parse(fs.readFileSync(this.fileOf(id), 'utf8')) as Partial<ImageRecord>;
      if (r.id !== id || !Array.isArray(r.refs) || !Array.isArray(r.names) || typeof r.bytes !== 'number') return null;
      return { id, refs: r.refs, names: r.names, owned: r.owned === true, bytes: r.bytes, pulled_at: String(r.pulled_at ?? '') };
    } catch {
      return null;
    }
  }

  /** Writes a record whole (a new file renamed over the old: a reader never sees half of it); its mtime, the last use, is now. */
  private write(rec: ImageRecord): void {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const tmp = path.join(this.dir, `.${rec.id}.${process.pid}.tmp`);
    fs.writeFileSync(tmp, `${JSON.stringify(rec)}\n`, { mode: 0o600 });
    fs.renameSync(tmp, this.fileOf(rec.id));
  }
}

/** What an image counts against the bound: its size where the agent's pull brought it, nothing where podman had it. */
const counted = (e: ImageRecord) => (e.owned ? e.bytes : 0);

const describe = (e: ImageEntry) => `image ${e.refs.join(', ')} (${e.id.slice(0, 12)}, ${formatBytes(e.bytes)})`;
