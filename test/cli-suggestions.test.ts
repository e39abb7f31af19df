import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/test-app.ts';

const run = promisify(execFile);
const gpuctl = path.resolve('cli/gpuctl.mjs');

/** gpuctl as a child process: the names people guess, and commander's suggestions on its one error line. */
describe('gpuctl suggestions', () => {
  let t: TestApp;
  const cli = async (...args: string[]) => {
    try {
      const r = await run(process.execPath, [gpuctl, '--api', t.url, ...args], { env: { ...process.env, GPUPLANE_LOG_LEVEL: 'warn' } });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

  beforeAll(async () => {
    t = await startTestApp('cli-suggestions', { temporal: false, listen: true });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('takes gpuctl sweep list as gpuctl sweeps', async () => {
    const list = await cli('sweep', 'list', '--json');
    expect(list).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(list.stdout)).toEqual(JSON.parse((await cli('sweeps', '--json')).stdout));
  });

  it("keeps commander's suggestion on the one error line", async () => {
    expect(await cli('sweps')).toMatchObject({ code: 1, stderr: "gpuctl: unknown command 'sweps' (did you mean sweeps?)\n" });
    expect(await cli('sweep', 'lst')).toMatchObject({ code: 1, stderr: "gpuctl: unknown command 'lst' (did you mean list?)\n" });
    expect(await cli('jobs', '--limt', '3')).toMatchObject({ code: 1, stderr: "gpuctl: unknown option '--limt' (did you mean --limit?)\n" });
  });
});
