import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
// @ts-expect-error: plain JavaScript, run by node before any TypeScript loads
import { freshBuild } from '../runtime/dist.mjs';
import { gpuctlPath } from './support/cluster.ts';

describe('the build in .dist', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-dist-'));
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it('is taken while every source it names is unchanged, and never once one changed or is gone', () => {
    const off = process.env.GPUPLANE_NO_DIST;
    delete process.env.GPUPLANE_NO_DIST;
    onTestFinished(() => {
      if (off !== undefined) process.env.GPUPLANE_NO_DIST = off;
    });
    const dir = path.join(root, '.dist');
    fs.mkdirSync(path.join(dir, 'cli'), { recursive: true });
    fs.mkdirSync(path.join(root, 'cli'));
    fs.writeFileSync(path.join(root, 'cli/main.ts'), 'export const a = 1;\n');
    fs.writeFileSync(path.join(root, 'cli/other.ts'), 'export const b = 2;\n');
    fs.writeFileSync(path.join(dir, 'cli/main.mjs'), 'export const a = 1;\n');
    const stamp = (f: string) => {
      const st = fs.statSync(path.join(root, f));
      return [st.size, st.mtimeMs];
    };
    expect(freshBuild('cli/main.ts', dir, root)).toBeNull(); // no manifest yet
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ inputs: { 'cli/main.ts': stamp('cli/main.ts'), 'cli/other.ts': stamp('cli/other.ts') } }));
    expect(freshBuild('cli/main.ts', dir, root)).toBe(path.join(dir, 'cli/main.mjs'));
    expect(freshBuild('cli/elsewhere.ts', dir, root)).toBeNull(); // not an entry of this build
    // Same size, touched later: an edit that kept the length.
    fs.utimesSync(path.join(root, 'cli/other.ts'), new Date(), new Date(Date.now() + 5000));
    expect(freshBuild('cli/main.ts', dir, root)).toBeNull();
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ inputs: { 'cli/main.ts': stamp('cli/main.ts'), 'cli/other.ts': stamp('cli/other.ts') } }));
    expect(freshBuild('cli/main.ts', dir, root)).not.toBeNull();
    fs.rmSync(path.join(root, 'cli/other.ts'));
    expect(freshBuild('cli/main.ts', dir, root)).toBeNull();
  });

  it('runs gpuctl the same built as from the sources', () => {
    const run = (env: Record<string, string>) => spawnSync(process.execPath, [gpuctlPath, 'submit', '--gpus', 'two'], { env: { ...process.env, ...env }, encoding: 'utf8' });
    const [built, sources] = [run({}), run({ GPUPLANE_NO_DIST: '1' })];
    expect(built.status).not.toBe(0);
    expect([built.status, built.stderr]).toEqual([sources.status, sources.stderr]);
    expect(built.stderr.trim().split('\n')).toHaveLength(1);
  });
});
