/**
 * A Run's local JSONL file (sdk/ts/offline.ts writes it): the whole run in offline mode, what
 * waited when the buffer filled while the API was away (the spill), or what the API had not
 * taken when finish() gave up on it. Each way out tells the user, once, where the file is and
 * the command that uploads it. Kept apart from run.ts, which decides when these happen.
 */
import { OfflineFile, offlinePath, uploadCommand } from './offline.ts';
import type { Outbox } from './outbox.ts';

export type FileStatus = 'finished' | 'failed' | 'cancelled';

export interface LocalFileSetup {
  /** The file's first line: the run (project, experiment, name, params, tags, system_tags). */
  runLine: Record<string, unknown>;
  dir: string;
  /** Part of the file's name: the run's own key prefix. */
  keyPrefix: string;
  /** The address the upload command names; null where gpuctl finds it by default. */
  uploadApiUrl: string | null;
  /** The API's address, for the words. */
  base: string;
  maxBuffer: number;
  warn: (msg: string) => void;
  notice: (msg: string) => void;
}

/** Who the run is to the API, when a file is made or closed: its id (null: not registered), and whether a job made it. */
export interface RunIdentity {
  runId: string | null;
  attached: boolean;
}

export class LocalFile {
  private file: OfflineFile | null = null;
  /** The file could not be written: past the bound the newest points are dropped. */
  broken = false;

  constructor(private readonly s: LocalFileSetup) {}

  get path(): string | null {
    return this.file?.path ?? null;
  }

  get opened(): boolean {
    return this.file !== null;
  }

  open(extra: Record<string, unknown> = {}): OfflineFile {
    const line = { ...this.s.runLine, ...extra };
    this.file = new OfflineFile(offlinePath(this.s.dir, (line.name ?? line.project) as string | undefined, this.s.keyPrefix), line);
    return this.file;
  }

  /** The file, opened first when it is not (a job's run names itself in the run line). */
  private openFor(who: RunIdentity): OfflineFile {
    const sys = (this.s.runLine.system_tags ?? {}) as Record<string, string>;
    return this.file ?? this.open(who.attached ? { system_tags: { ...sys, 'sdk.job_run': String(who.runId) } } : {});
  }

  /** Offline mode: what waits goes to the file instead of the API. Returns the points the encoder refused. */
  writeAll(outbox: Outbox): number {
    const refused = outbox.cut();
    this.file?.write(outbox.items);
    while (outbox.items.length) outbox.shift();
    return refused;
  }

  /**
   * The API stayed away past finish()'s wait: what it did not take goes to the file, with the
   * upload command. `ok` false when the file could not be written; `refused`: points the encoder refused.
   */
  writeRest(outbox: Outbox, who: RunIdentity, status: FileStatus): { ok: boolean; refused: number } {
    let f: OfflineFile;
    let refused = 0;
    const whole = who.runId === null && !who.attached;
    try {
      refused = outbox.cut();
      f = this.openFor(who);
      if (!whole) {
        const body = { kind: 'sdk.offline', message: `the API was away at the end of the run: what it had not stored was written to ${f.path} and imported from there; the script ended ${status}`, level: 'warning', data: { status, file: f.path } };
        f.write([{ kind: 'event', body: JSON.stringify(body), key: '', ts: Date.now() }]);
      }
      f.write(outbox.items);
      outbox.clear();
      outbox.pendingEvents = 0;
      f.close(status);
    } catch (err) {
      this.s.warn(`gpuplane: could not write the run's offline file (${(err as Error).message})`);
      return { ok: false, refused };
    }
    const what = whole ? 'the run' : who.attached ? "what the job's run had not stored" : `what run ${who.runId} had not stored`;
    this.s.notice(
      `gpuplane: WARNING: the API at ${this.s.base} could not be reached: ${what} (${f.points} points, ${f.events} events) was written to\n` +
        `gpuplane:   ${f.path}\ngpuplane: upload it when the API is back:\ngpuplane:   ${uploadCommand(f.path, this.s.uploadApiUrl)}`,
    );
    return { ok: true, refused };
  }

  /**
   * The buffer is full and the API away (`why`: how): what waits goes to the file, making room;
   * the API gets what is logged from now on when it comes back.
   */
  spill(outbox: Outbox, who: RunIdentity, why: string): void {
    const first = this.file === null;
    try {
      this.openFor(who).write(outbox.items);
    } catch (err) {
      this.broken = true;
      return this.s.warn(`gpuplane: could not write the run's offline file (${(err as Error).message}): past GPUPLANE_SDK_MAX_BUFFER the newest points are dropped`);
    }
    while (outbox.items.length) outbox.shift();
    if (first) {
      this.s.notice(`gpuplane: the API at ${this.s.base} ${why} and ${this.s.maxBuffer} points wait (GPUPLANE_SDK_MAX_BUFFER): what waits goes to ${this.file?.path} (the end of the run says how to upload it)`);
    }
  }

  /** The API took the end of the run, but part of it was spilled to the file earlier. */
  closeSpilled(who: RunIdentity, status: FileStatus): void {
    const f = this.file;
    if (!f) return;
    try {
      if (who.runId !== null) {
        const body = { kind: 'sdk.offline', message: `the API was away during the run: ${f.points} points it had not stored were written to ${f.path} and imported from there`, level: 'warning', data: { status, file: f.path } };
        f.write([{ kind: 'event', body: JSON.stringify(body), key: '', ts: Date.now() }]);
      }
      f.close(status);
    } catch (err) {
      return this.s.notice(`gpuplane: WARNING: could not complete the offline file ${f.path}: ${(err as Error).message}`);
    }
    this.s.notice(
      `gpuplane: WARNING: the API at ${this.s.base} was away during the run: part of it (${f.points} points, ${f.events} events) is only in\n` +
        `gpuplane:   ${f.path}\ngpuplane: upload it:\ngpuplane:   ${uploadCommand(f.path, this.s.uploadApiUrl)}`,
    );
  }

  /** Offline mode's end: the file is the run. */
  closeOffline(status: FileStatus): void {
    const f = this.file;
    if (!f) return;
    try {
      f.close(status);
    } catch (err) {
      return this.s.notice(`gpuplane: WARNING: could not complete the offline file ${f.path}: ${(err as Error).message}`);
    }
    this.s.notice(
      `gpuplane: WARNING: offline mode (GPUPLANE_MODE=offline): nothing was sent to an API; the run (${f.points} points, ${f.events} events) is in\n` +
        `gpuplane:   ${f.path}\ngpuplane: upload it with:\ngpuplane:   ${uploadCommand(f.path, this.s.uploadApiUrl)}`,
    );
  }
}
