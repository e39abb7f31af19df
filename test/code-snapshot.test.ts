import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { unpackCheckpoint } from '../activities/gpu-host/checkpoint-pack.ts';
import { byteSizeArg } from '../cli/client-code.ts';
import { gitStateOf, overLimit, snapshotCode, walkCode } from '../cli/code-snapshot.ts';
import { codeRefProblem } from '../domain/code-snapshot.ts';

/**
 * The snapshot of `gpuctl submit --code DIR` (cli/code-snapshot.ts): which files go in (git's
 * ignore rules in .gitignore and .gpuplaneignore, .git never, links left out), that the same tree
 * gives the same bytes wherever and whenever it is, and that the node's unpacker takes the tar.
 */
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'code-snapshot-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A folder with these files (path → text). */
function tree(name: string, files: Record<string, string>): string {
  const root = path.join(tmp, name);
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), text);
  }
  return root;
}

const project = {
  'train.py': 'print("hi")\n',
  'lib/model.py': 'x = 1\n',
  'lib/__pycache__/model.cpython-311.pyc': 'junk',
  'data/big.bin': 'x'.repeat(1000),
  'data/keep.txt': 'kept\n',
  'logs/run.log': 'noise',
  'notes/a.tmp': 'tmp',
  'notes/b.md': 'b',
  '.gitignore': '__pycache__/\n*.log\ndata/*\n!data/keep.txt\n',
  '.gpuplaneignore': 'data/big.bin\n',
  'notes/.gitignore': '*.tmp\n',
};

describe('code snapshots', () => {
  it('honours .gitignore and .gpuplaneignore at every level, leaves out .git and links, and keeps empty folders', () => {
    const root = tree('rules', project);
    fs.mkdirSync(path.join(root, '.git/objects'), { recursive: true });
    fs.writeFileSync(path.join(root, '.git/HEAD'), 'ref: refs/heads/main\n');
    fs.mkdirSync(path.join(root, 'empty'));
    fs.symlinkSync('/etc/passwd', path.join(root, 'lib/passwd'));
    const w = walkCode(root);
    expect(w.files.map((f) => f.rel).sort()).toEqual(['.gitignore', '.gpuplaneignore', 'data/keep.txt', 'lib/model.py', 'notes/.gitignore', 'notes/b.md', 'train.py']);
    expect(w.dirs.sort()).toEqual(['data', 'empty', 'lib', 'logs', 'notes']);
    expect(w.skipped).toEqual(['lib/passwd (a symbolic link)']);
  });

  it('gives the same sha256 for the same tree, made at another time in another folder, and another for one changed byte', async () => {
    const a = tree('same-a', project);
    const b = tree('same-b', project);
    fs.utimesSync(path.join(b, 'train.py'), new Date(2001, 1, 1), new Date(2001, 1, 1));
    const sa = await snapshotCode(a, 1 << 20);
    const sb = await snapshotCode(b, 1 << 20);
    expect(sb.sha256).toBe(sa.sha256);
    expect(fs.readFileSync(sb.file).equals(fs.readFileSync(sa.file))).toBe(true);
    fs.writeFileSync(path.join(b, 'train.py'), 'print("ho")\n');
    const sc = await snapshotCode(b, 1 << 20);
    expect(sc.sha256).not.toBe(sa.sha256);
    for (const s of [sa, sb, sc]) s.dispose();
    expect(fs.existsSync(sa.file)).toBe(false);
  });

  it("unpacks with the node's unpacker under code/, files and empty folders as they were", async () => {
    const root = tree('unpack', project);
    fs.mkdirSync(path.join(root, 'empty'));
    const s = await snapshotCode(root, 1 << 20);
    const dest = path.join(tmp, 'unpacked');
    const r = await unpackCheckpoint(Readable.from([fs.readFileSync(s.file)]), dest);
    s.dispose();
    expect(r.path).toBe(path.join(dest, 'code'));
    expect(fs.readFileSync(path.join(dest, 'code/train.py'), 'utf8')).toBe('print("hi")\n');
    expect(fs.readFileSync(path.join(dest, 'code/data/keep.txt'), 'utf8')).toBe('kept\n');
    expect(fs.existsSync(path.join(dest, 'code/data/big.bin'))).toBe(false);
    expect(fs.statSync(path.join(dest, 'code/empty')).isDirectory()).toBe(true);
  });

  it('refuses a folder over the limit in one line naming its largest files, and one that is missing or not a folder', async () => {
    const root = tree('big', { 'a.bin': 'a'.repeat(3000), 'b.bin': 'b'.repeat(2000), 'c.txt': 'c' });
    const why = overLimit(walkCode(root), 4000, 'big');
    expect(why).toMatch(/^--code big: 0\.0 MiB in 3 files is over the limit of 0\.0 MiB \(--code-limit\); the largest: a\.bin \(0\.0 MiB\), b\.bin \(0\.0 MiB\), c\.txt/);
    expect(why).not.toContain('\n');
    await expect(snapshotCode(root, 4000)).rejects.toThrow(/over the limit/);
    await expect(snapshotCode(path.join(tmp, 'nope'), 4000)).rejects.toThrow(/^--code .*nope: no such folder$/);
    await expect(snapshotCode(path.join(root, 'c.txt'), 4000)).rejects.toThrow(/: not a folder$/);
  });

  it("records a git checkout's commit and whether it is dirty; none outside a checkout", async () => {
    const root = tree('git', { 'train.py': 'print(1)\n', '.gitignore': 'out/\n' });
    const git = (...args: string[]) => execFileSync('git', ['-C', root, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { stdio: 'pipe' }).toString().trim();
    git('init', '-q');
    git('add', '.');
    git('commit', '-q', '-m', 'one');
    const head = git('rev-parse', 'HEAD');
    fs.mkdirSync(path.join(root, 'out'));
    fs.writeFileSync(path.join(root, 'out/ignored.txt'), 'x');
    expect(await gitStateOf(root)).toEqual({ commit: head, dirty: false });
    fs.writeFileSync(path.join(root, 'train.py'), 'print(2)\n');
    expect(await gitStateOf(root)).toEqual({ commit: head, dirty: true });
    expect(await gitStateOf(tree('nogit', { 'a.txt': 'a' }))).toBeNull();
  });

  it('reads --code-limit sizes, and knows a well-formed snapshot reference from a bad one', () => {
    const arg = byteSizeArg('--code-limit');
    expect([arg('1000'), arg('500K'), arg('50M'), arg('1G')]).toEqual([1000, 500 * 1024, 50 * 1024 ** 2, 1024 ** 3]);
    expect(() => arg('5T')).toThrow(/--code-limit must be a size/);
    expect(() => arg('0')).toThrow(/--code-limit/);
    expect(codeRefProblem({ sha256: 'a'.repeat(64) })).toBeNull();
    expect(codeRefProblem({ sha256: 'A'.repeat(64) })).toEqual({ at: '.sha256', problem: 'must be 64 lowercase hex digits' });
    expect(codeRefProblem({ sha256: 'a'.repeat(64), key: 'code/other/x.tar' })?.at).toBe('.key');
    expect(codeRefProblem({ sha256: 'a'.repeat(64), git: { commit: 'b'.repeat(40), dirty: 'yes' } })?.at).toBe('.git.dirty');
  });
});
