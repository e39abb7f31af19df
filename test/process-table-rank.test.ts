import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { rankOfRecord, type AttemptRecord } from '../activities/gpu-host/attempt-record.ts';
import { ProcessTable } from '../activities/gpu-host/process-table.ts';
import type { AttemptSpec } from '../workflows/types.ts';

/** The rank a gang member's log is shipped under comes from the spec its attempt record keeps (supervise.ts, agent.ts). */
describe("an attempt record's rank", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-pt-rank-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const pt = new ProcessTable(1000, path.join(dir, 'run'));
  const spec = { jobId: 'job-r', attempt: 1, nodeId: 'n2', command: ['true'], workingDir: '/tmp', env: {}, params: {}, gpuIndices: [0], lostAfterMs: 60_000 } as unknown as AttemptSpec;
  const record = (s: AttemptSpec): AttemptRecord => ({ spec: s, pid: 1, startTime: '', logPath: '/x/attempt-1.log' });

  it("is the gang member's rank, 0 for a single-node job and for a record written before gangs", () => {
    const gang = { rank: 2, masterPort: 29500, members: [] };
    expect(rankOfRecord(record({ ...spec, gang }))).toBe(2);
    expect(rankOfRecord(record(spec))).toBe(0);
    fs.writeFileSync(pt.file('job-r', 1, 'json'), JSON.stringify(record({ ...spec, gang })));
    fs.writeFileSync(pt.file('job-s', 1, 'json'), JSON.stringify(record({ ...spec, jobId: 'job-s' })));
    fs.writeFileSync(pt.file('job-t', 1, 'json'), '{not json');
    expect([pt.rankOf('job-r', 1), pt.rankOf('job-s', 1), pt.rankOf('job-t', 1), pt.rankOf('job-none', 1)]).toEqual([2, 0, 0, 0]);
  });
});
