import fs from 'node:fs';
import path from 'node:path';
import { livenessPlan } from '../../domain/liveness.ts';
import { writePrivateFile } from '../../runtime/private-files.ts';
import { attemptProblem, idProblem } from '../../runtime/tokens.ts';
import { AttemptCgroups } from './cgroup.ts';
import { removeContainerOf } from './container-run.ts';
import { processStartTime } from './proc.ts';
import type { AttemptRecord, Live } from './attempt-record.ts';
import type { ProcessTable } from './process-table.ts';
import { watchStatus } from './shim.ts';

/*
 * What an agent finds on disk from its earlier lives: attempts that still run (adopted) and
 * records of attempts that ended (kept a while for late watchJobs, then swept).
 */

/**
 * Records of attempts that ended are kept so that a late watchJob (after a control-plane
 * outage, or an agent restart) can still read their status; they go once their status file
 * is older than `olderThanMs`. Records without a status whose process is gone are fenced or
 * vanished attempts: they go too.
 */
export function sweepRecords(pt: ProcessTable, olderThanMs: number): void {
  const cutoff = Date.now() - olderThanMs;
  for (const f of fs.readdirSync(pt.runDir)) {
    const m = /^(.+)\.(\d+)\.json$/.exec(f);
    if (!m || pt.live.get(m[1])?.attempt === Number(m[2])) continue;
    const [jobId, attempt] = [m[1], Number(m[2])];
    try {
      const rec = JSON.parse(fs.readFileSync(path.join(pt.runDir, f), 'utf8')) as AttemptRecord;
      if (processStartTime(rec.pid) === rec.startTime) continue;
      const status = pt.file(jobId, attempt, 'status');
      const endedAt = fs.existsSync(status) ? fs.statSync(status).mtimeMs : fs.statSync(path.join(pt.runDir, f)).mtimeMs;
      if (endedAt > cutoff) continue;
    } catch {
      // Unreadable: gone with the rest.
    }
    pt.forget(jobId, attempt);
  }
}

/** The attempt records in the agent's run folder that name a GPUPlane attempt (a record that does not was not written by an agent: it joins no path). */
function readRecords(pt: ProcessTable): AttemptRecord[] {
  const out: AttemptRecord[] = [];
  for (const f of fs.readdirSync(pt.runDir).filter((x) => x.endsWith('.json'))) {
    try {
      const rec = JSON.parse(fs.readFileSync(path.join(pt.runDir, f), 'utf8')) as AttemptRecord;
      if (!(idProblem('job id', rec.spec.jobId) ?? attemptProblem(rec.spec.attempt))) out.push(rec);
    } catch {
      // Unreadable or not a record: skipped.
    }
  }
  return out;
}

/**
 * Records of attempts whose process is gone (ended, fenced, or killed with a node that died
 * whole): what they wrote after the agent stopped watching is still to be shipped.
 */
export function goneRecords(pt: ProcessTable): AttemptRecord[] {
  return readRecords(pt).filter((rec) => processStartTime(rec.pid) !== rec.startTime);
}

/**
 * A restarted agent adopts the attempts of its previous life that still run (same pid and
 * start time): it tells their shims it is their owner now, so they are not fenced, and
 * returns them so their workflows can switch to watching them.
 */
export function adoptSurvivors(pt: ProcessTable, defaultLostAfterMs: number, stillWanted: (r: AttemptRecord) => Promise<boolean>): AttemptRecord[] {
  const adopted: AttemptRecord[] = [];
  const ended: AttemptRecord[] = [];
  for (const rec of readRecords(pt)) {
    const { jobId, attempt } = rec.spec;
    const alive = processStartTime(rec.pid) === rec.startTime;
    if (!alive) ended.push(rec);
    if (!alive || fs.existsSync(pt.file(jobId, attempt, 'fenced'))) continue;
    writePrivateFile(pt.file(jobId, attempt, 'adopt'), String(process.pid));
    const entry: Live = {
      jobId,
      attempt,
      pid: rec.pid,
      startTime: rec.startTime,
      uid: rec.uid ?? null,
      exited: watchStatus(rec.pid, pt.file(jobId, attempt, 'status')),
      fenced: false,
      // The attempt's own timing, from its spec; the agent's only for records that lack it.
      ...livenessPlan(rec.spec.lostAfterMs ?? defaultLostAfterMs, pt.killGraceMs),
      watcher: 0,
      cgroup: rec.cgroup ?? null,
    };
    pt.live.set(jobId, entry);
    // If its workflow has moved on (it counted the attempt LOST before we were back), no
    // watchJob comes: the adopted process is fenced before a new attempt could overlap it.
    pt.orphan(entry, entry.fenceAfterMs, () => stillWanted(rec));
    adopted.push(rec);
  }
  // Attempts that ended (or were fenced by their shims) while no agent watched may have left
  // processes the shim could not reach (a setsid child of a job user): they go now, once the
  // survivors are known and spared.
  for (const rec of ended) {
    // An image job's container outlives a shim killed whole (its node's processes SIGKILLed): removed by name.
    void removeContainerOf(pt.file(rec.spec.jobId, rec.spec.attempt, 'container'));
    void AttemptCgroups.remove(rec.cgroup);
    pt.sweep({ jobId: rec.spec.jobId, attempt: rec.spec.attempt, pid: rec.pid, startTime: rec.startTime, uid: rec.uid ?? null });
  }
  return adopted;
}
