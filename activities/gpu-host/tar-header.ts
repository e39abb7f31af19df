/**
 * The 512-byte headers of a checkpoint's tar (checkpoint-pack.ts), written straight into the
 * upload's part buffers rather than through tar-stream's pack stream. Byte for byte what
 * tar-stream 3's `pack` writes for the same entry (test/checkpoint-pack.test.ts holds the two
 * together), so the unpacker and `tar -x` read it as before: ustar, the name split into prefix and
 * name where it fits, else a pax header carrying the path.
 */

/** A tar's end: two zero blocks. */
export const END_OF_TAR = Buffer.alloc(1024);

export interface TarEntry {
  name: string;
  type: 'file' | 'directory';
  size: number;
  mode: number;
  mtime: Date;
}

const oct = (n: number, width: number) => {
  const s = n.toString(8);
  return s.length > width ? `${'7'.repeat(width)} ` : `${s.padStart(width, '0')} `;
};

/** tar-stream's size field: octal, or base-256 past 11 octal digits (8 GiB). */
function writeSize(n: number, buf: Buffer, at: number): void {
  if (n.toString(8).length <= 11) return void buf.write(oct(n, 11), at, 'latin1');
  buf[at] = 0x80;
  for (let i = 11; i > 0; i--) {
    buf[at + i] = n & 0xff;
    n = Math.floor(n / 0x100);
  }
}

/** One ustar block; null when the name does not fit (or is not ASCII). */
function ustar(e: { name: string; typeflag: number; size: number; mode: number; mtime: Date }): Buffer | null {
  // tar-stream adds no `/` to a folder's name (its encoder looks for a typeflag it is never given).
  let name = e.name;
  let prefix = '';
  if (Buffer.byteLength(name) !== name.length) return null;
  while (name.length > 100) {
    const i = name.indexOf('/');
    if (i === -1) return null;
    prefix += prefix ? `/${name.slice(0, i)}` : name.slice(0, i);
    name = name.slice(i + 1);
  }
  if (name.length > 100 || prefix.length > 155) return null;
  const buf = Buffer.alloc(512);
  buf.write(name, 0, 'latin1');
  buf.write(oct(e.mode & 0o7777, 6), 100, 'latin1');
  buf.write(oct(0, 6), 108, 'latin1');
  buf.write(oct(0, 6), 116, 'latin1');
  writeSize(e.size, buf, 124);
  writeSize(Math.floor(e.mtime.getTime() / 1000) || 0, buf, 136);
  buf[156] = 0x30 + e.typeflag;
  buf.write('ustar\u000000', 257, 'latin1');
  buf.write(oct(0, 6), 329, 'latin1');
  buf.write(oct(0, 6), 337, 'latin1');
  if (prefix) buf.write(prefix, 345, 'latin1');
  let sum = 8 * 32;
  for (let i = 0; i < 512; i++) if (i < 148 || i >= 156) sum += buf[i];
  buf.write(oct(sum, 6), 148, 'latin1');
  return buf;
}

/** A pax record: its own length in decimal, then ` key=value\n`. */
function paxRecord(s: string): string {
  const len = Buffer.byteLength(s);
  let digits = Math.floor(Math.log(len) / Math.log(10)) + 1;
  if (len + digits >= 10 ** digits) digits++;
  return `${len + digits}${s}`;
}

/** The bytes that open an entry: its header block, or a pax header, its records (padded to a block) and the header block after it. */
export function entryHeader(e: TarEntry): Buffer {
  const typeflag = e.type === 'directory' ? 5 : 0;
  const plain = ustar({ ...e, typeflag });
  if (plain) return plain;
  const records = Buffer.from(paxRecord(` path=${e.name}\n`));
  const pad = (512 - (records.length % 512)) % 512;
  const paxHead = ustar({ name: 'PaxHeader', typeflag: 'x'.charCodeAt(0) - 0x30, size: records.length, mode: e.mode, mtime: e.mtime })!;
  const head = ustar({ name: 'PaxHeader', typeflag, size: e.size, mode: e.mode, mtime: e.mtime })!;
  return Buffer.concat([paxHead, records, Buffer.alloc(pad), head]);
}

/** Zero bytes after `size` bytes of data, to the next block. */
export const paddingOf = (size: number) => (512 - (size % 512)) % 512;
