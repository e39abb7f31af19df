/**
 * Reads TensorBoard event files (`events.out.tfevents.*`): TFRecord framing of Event protos,
 * scalars only. Both encodings are read: `simple_value` (tensorboardX) and a 0-d `tensor` whose
 * tag was announced with `plugin_data.plugin_name = "scalars"` (TensorBoard's own writers and
 * tensorboardX with new_style=True; the metadata comes with the first value of a tag only).
 */

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';
import { addPoint, ImportError, type ImportedPoint, type ImportedRun } from './types.ts';

const root = protobuf.parse(fs.readFileSync(new URL('./tensorboard.proto', import.meta.url), 'utf8'), { keepCase: true }).root;
const EventType = root.lookupType('gpuplane.tensorboard.Event');

export const isEventFileName = (name: string) => name.includes('tfevents');

// CRC-32C (Castagnoli), as TFRecord uses it, and its masking.
const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();
function crc32c(buf: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < buf.length; i++) c = CRC_TABLE[(c ^ buf[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
const maskedCrc = (buf: Uint8Array) => {
  const c = crc32c(buf);
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
};

/** The records of one TFRecord file; a bad checksum or a file that ends inside a record is an error. */
export function* tfRecords(file: string, buf: Buffer = fs.readFileSync(file)): Generator<Buffer> {
  let off = 0;
  while (off < buf.length) {
    if (off + 12 > buf.length) throw new ImportError(`${file}: truncated record at byte ${off} (the file ends inside a record header; was the writer killed?)`);
    const len = buf.readBigUInt64LE(off);
    if (buf.readUInt32LE(off + 8) !== maskedCrc(buf.subarray(off, off + 8))) throw new ImportError(`${file}: corrupt record at byte ${off} (length checksum mismatch); not a TensorBoard event file?`);
    const end = off + 12 + Number(len) + 4;
    if (len > BigInt(buf.length) || end > buf.length) throw new ImportError(`${file}: truncated record at byte ${off} (needs ${len} bytes of data, the file ends first; was the writer killed?)`);
    const data = buf.subarray(off + 12, off + 12 + Number(len));
    if (buf.readUInt32LE(end - 4) !== maskedCrc(data)) throw new ImportError(`${file}: corrupt record at byte ${off} (data checksum mismatch)`);
    yield data;
    off = end;
  }
}

interface TensorProto {
  dtype?: number;
  tensor_content?: Uint8Array;
  half_val?: number[];
  float_val?: number[];
  double_val?: number[];
  int_val?: number[];
  int64_val?: (number | { toNumber(): number })[];
  bool_val?: boolean[];
  uint32_val?: number[];
  uint64_val?: (number | { toNumber(): number })[];
}
interface SummaryValue {
  tag?: string;
  metadata?: { plugin_data?: { plugin_name?: string }; data_class?: number };
  simple_value?: number;
  tensor?: TensorProto;
  value?: string;
}
interface EventMessage {
  wall_time?: number;
  step?: number | { toNumber(): number };
  summary?: { value?: SummaryValue[] };
}

const num = (v: number | { toNumber(): number } | undefined) => (v === undefined ? 0 : typeof v === 'number' ? v : v.toNumber());

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * 2 ** -14 * (f / 1024);
  if (e === 0x1f) return f ? NaN : s * Infinity;
  return s * 2 ** (e - 15) * (1 + f / 1024);
}

/** The single number of a scalar tensor, or undefined for anything else (strings, vectors...). */
export function tensorScalar(t: TensorProto): number | undefined {
  const c = t.tensor_content;
  if (c && c.length) {
    const v = new DataView(c.buffer, c.byteOffset, c.byteLength);
    switch (t.dtype) {
      case 1: return c.length === 4 ? v.getFloat32(0, true) : undefined;
      case 2: return c.length === 8 ? v.getFloat64(0, true) : undefined;
      case 3: return c.length === 4 ? v.getInt32(0, true) : undefined;
      case 9: return c.length === 8 ? Number(v.getBigInt64(0, true)) : undefined;
      case 19: return c.length === 2 ? halfToFloat(v.getUint16(0, true)) : undefined;
      case 14: return c.length === 2 ? new DataView(new Uint32Array([v.getUint16(0, true) << 16]).buffer).getFloat32(0, true) : undefined;
      default: return undefined;
    }
  }
  const one = <T>(a: T[] | undefined) => (a && a.length === 1 ? a[0] : undefined);
  switch (t.dtype) {
    case 1: return one(t.float_val);
    case 2: return one(t.double_val);
    case 3: case 4: case 5: case 6: return one(t.int_val);
    case 9: { const x = one(t.int64_val); return x === undefined ? undefined : num(x); }
    case 10: { const x = one(t.bool_val); return x === undefined ? undefined : Number(x); }
    case 19: { const x = one(t.half_val); return x === undefined ? undefined : halfToFloat(x); }
    case 14: { const x = one(t.half_val); return x === undefined ? undefined : new DataView(new Uint32Array([x << 16]).buffer).getFloat32(0, true); }
    case 22: return one(t.uint32_val);
    case 23: { const x = one(t.uint64_val); return x === undefined ? undefined : num(x); }
    default: return undefined;
  }
}

/** Adds the scalars of one event file to `metrics`; returns its first record and its time span (s). */
function readEventFile(file: string, metrics: Map<string, ImportedPoint[]>): { first?: Buffer; firstWall?: number; lastWall?: number } {
  const scalarTags = new Set<string>();
  let first: Buffer | undefined;
  let firstWall: number | undefined;
  let lastWall: number | undefined;
  for (const rec of tfRecords(file)) {
    first ??= rec;
    let ev: EventMessage;
    try {
      ev = EventType.decode(rec) as unknown as EventMessage;
    } catch (err) {
      throw new ImportError(`${file}: a record is not an Event proto (${(err as Error).message})`);
    }
    if (ev.wall_time) {
      firstWall = Math.min(firstWall ?? Infinity, ev.wall_time);
      lastWall = Math.max(lastWall ?? -Infinity, ev.wall_time);
    }
    for (const v of ev.summary?.value ?? []) {
      if (!v.tag) continue;
      const plugin = v.metadata?.plugin_data?.plugin_name;
      if (plugin === 'scalars' || v.metadata?.data_class === 1) scalarTags.add(v.tag);
      let value: number | undefined;
      if (v.value === 'simple_value') value = v.simple_value;
      else if (v.value === 'tensor' && v.tensor && scalarTags.has(v.tag)) value = tensorScalar(v.tensor);
      if (value === undefined) continue;
      addPoint(metrics, v.tag, { step: num(ev.step), value, ts: ev.wall_time ? Math.round(ev.wall_time * 1000) : undefined });
    }
  }
  return { first, firstWall, lastWall };
}

/** The folders under `p` (itself included) that hold event files, with their files sorted by name. */
export function findEventRuns(p: string): { dir: string; files: string[] }[] {
  if (fs.statSync(p).isFile()) return [{ dir: path.dirname(p), files: [p] }];
  const runs: { dir: string; files: string[] }[] = [];
  const walk = (d: string) => {
    const entries = fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
    const files = entries.filter((e) => e.isFile() && isEventFileName(e.name)).map((e) => path.join(d, e.name));
    if (files.length) runs.push({ dir: d, files });
    for (const e of entries) if (e.isDirectory() && !e.name.startsWith('.')) walk(path.join(d, e.name));
  };
  walk(p);
  return runs;
}

/**
 * One run per folder of event files (a folder's files, in name order, are one run written in
 * pieces, e.g. after a restart). The external key hashes the first file's name and first record,
 * which neither the folder's location nor later files change. A run is named by its folder
 * relative to `p`; the project is `p`'s name, or its parent's when `p` is itself a run (a run
 * folder, an event file), so `logs/`, `logs/a` and `logs/a/events...` all put run "a" in "logs".
 */
export function readTensorboard(p: string): ImportedRun[] {
  const isFile = fs.statSync(p).isFile();
  const rootDir = path.resolve(isFile ? path.dirname(p) : p);
  const found = findEventRuns(p);
  const rootIsRun = found.some(({ dir }) => path.resolve(dir) === rootDir);
  const project = path.basename(rootIsRun ? path.dirname(rootDir) : rootDir) || 'tensorboard';
  return found.map(({ dir, files }) => {
    const metrics = new Map<string, ImportedPoint[]>();
    let first: Buffer | undefined;
    let firstWall: number | undefined;
    let lastWall: number | undefined;
    for (const f of files) {
      const r = readEventFile(f, metrics);
      first ??= r.first;
      if (r.firstWall !== undefined) firstWall = Math.min(firstWall ?? Infinity, r.firstWall);
      if (r.lastWall !== undefined) lastWall = Math.max(lastWall ?? -Infinity, r.lastWall);
    }
    const hash = createHash('sha256').update(path.basename(files[0])).update('\0').update(first ?? Buffer.alloc(0)).digest('hex');
    const rel = path.relative(rootDir, path.resolve(dir)).split(path.sep).join('/');
    const names = files.map((f) => path.basename(f));
    return {
      externalKey: `tensorboard:${hash}`,
      store: 'tensorboard' as const,
      origin: isFile ? p : dir,
      project,
      experiment: project,
      name: rel || path.basename(rootDir),
      // Event files record no outcome; a run whose files all read cleanly to the end is finished.
      status: 'finished' as const,
      startedAt: firstWall ? new Date(firstWall * 1000).toISOString() : undefined,
      endedAt: lastWall ? new Date(lastWall * 1000).toISOString() : undefined,
      params: {},
      tags: {},
      systemTags: { 'import.tensorboard_files': names.length > 20 ? `${names.slice(0, 20).join(',')},… (${names.length} files)` : names.join(',') },
      metrics,
      events: [],
    };
  });
}
