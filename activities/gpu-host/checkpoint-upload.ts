/**
 * A node's uploads of the checkpoints its attempts register (issue 44, docs/storage.md): each
 * one, once found, is packed as a tar by a process running as the job's user
 * (checkpoint-packer.ts: the kernel decides what it may read) and stored in the plane's object
 * store under `checkpoints/<run>/<fingerprint>.tar`, content-addressed (checkpoint-put.ts: the
 * packer PUTs the parts itself where the store serves HTTP). The packer hashes exactly what it
 * packs: a copy whose hash is not the registered fingerprint (the files changed since) is deleted
 * and reported failed. Then the node tells the API (with its node token), asking again while the
 * checkpoint is not registered yet or the API is away. A few at a time, in order.
 */
import { checkpointKey } from '../../domain/checkpoint-key.ts';
import type { ObjectStore } from '../../runtime/object-store.ts';
import type { AttemptSpec } from '../../workflows/types.ts';
import type { FoundCheckpoint } from './checkpoint-watcher.ts';
import type { RunAs } from './checkpoint-scanner.ts';
import type { JobUser } from '../../domain/job-identity.ts';
import { reportAttemptEvent, reportStored } from './launch.ts';
import { uploadCheckpoint } from './checkpoint-put.ts';

/** Uploads at once on a node (each multipart, several parts in flight). */
const CONCURRENT = 2;
/** How long a report is asked again while the API is away or the checkpoint not registered yet. */
const REPORT_FOR_MS = 10 * 60_000;


/** The attempt an upload is of: its job, attempt and run. */
export type UploadOf = Pick<AttemptSpec, 'jobId' | 'attempt' | 'runId'>;

export type StoredReportBody = { uri: string; fingerprint: string } & ({ key: string; stored_bytes: number } | { failed: string });

export interface UploadsOptions {
  store: ObjectStore;
  /** Tells the API (POST …/checkpoints/stored); resolves with the HTTP status, throws when it did not answer. */
  report: (spec: Pick<AttemptSpec, 'jobId' | 'attempt'>, body: StoredReportBody) => Promise<number>;
  warn: (msg: string) => void;
  /** An event of the attempt (the time it took, or why not). */
  note?: (spec: UploadOf, message: string, level: 'info' | 'warning') => Promise<void>;
}

/** The node's queue of uploads. */
export class CheckpointUploads {
  private readonly queue: (() => Promise<void>)[] = [];
  private running = 0;
  private idle: (() => void)[] = [];
  /** Keys queued or uploading: a checkpoint found again (a watcher after a restart, the pending list) goes up once. */
  private readonly keys = new Set<string>();

  constructor(private readonly o: UploadsOptions) {}

  /** Uploads a checkpoint the attempt's watcher found (after it was sent for registration). */
  add(spec: UploadOf, c: Pick<FoundCheckpoint, 'uri' | 'fingerprint'>, user: RunAs | null): void {
    if (!spec.runId) return;
    const key = checkpointKey(spec.runId, c.fingerprint);
    if (this.keys.has(key)) return;
    this.keys.add(key);
    this.queue.push(async () => {
      const started = Date.now();
      let body: StoredReportBody;
      try {
        const up = await uploadCheckpoint(this.o.store, { key, path: c.uri, fingerprint: c.fingerprint, user });
        body = { uri: c.uri, fingerprint: c.fingerprint, key, stored_bytes: up.storedBytes };
        const how = up.unreached ? `, through the agent: its packer could not reach the store, ${up.unreached}` : '';
        await this.o.note?.(spec, `checkpoint ${c.uri} stored as ${key} (${up.storedBytes} bytes in ${((Date.now() - started) / 1000).toFixed(1)} s${how})`, 'info').catch(() => undefined);
      } catch (err) {
        body = { uri: c.uri, fingerprint: c.fingerprint, failed: (err as Error).message };
        this.o.warn(`checkpoint ${c.uri} of ${spec.jobId}#${spec.attempt} not stored: ${body.failed}`);
      }
      await this.tell(spec, body).finally(() => this.keys.delete(key));
    });
    this.pump();
  }

  /** Resolves once nothing is queued or uploading (tests, and an agent that stops). */
  settled(): Promise<void> {
    if (this.running === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((r) => this.idle.push(r));
  }

  private pump(): void {
    while (this.running < CONCURRENT && this.queue.length) {
      const job = this.queue.shift()!;
      this.running++;
      void job()
        .catch((err: unknown) => this.o.warn(`checkpoint upload: ${(err as Error).message}`))
        .finally(() => {
          this.running--;
          this.pump();
          if (this.running === 0 && this.queue.length === 0) for (const r of this.idle.splice(0)) r();
        });
    }
  }

  /** Reports until the API takes it (200), refuses it for good (4xx but 409), or REPORT_FOR_MS pass. */
  private async tell(spec: UploadOf, body: StoredReportBody): Promise<void> {
    const until = Date.now() + REPORT_FOR_MS;
    for (let wait = 250; ; wait = Math.min(wait * 2, 10_000)) {
      const status = await this.o.report(spec, body).catch(() => 0);
      if (status === 200) return;
      if (status >= 400 && status < 500 && status !== 409) return this.o.warn(`the API refused the storage report of ${body.uri} (${status})`);
      if (Date.now() + wait > until) return this.o.warn(`the storage report of ${body.uri} was not taken within ${REPORT_FOR_MS / 60_000} min (last: ${status || 'no answer'})`);
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

/** The node's checkpoints not stored yet, from the API with its node token. */
export async function listPendingUploads(api: Parameters<typeof reportStored>[0]): Promise<PendingUploadJson[]> {
  const res = await fetch(`${api.apiUrl.replace(/\/$/, '')}/api/v1/nodes/${encodeURIComponent(api.nodeId)}/checkpoints/pending`, { headers: { authorization: `Bearer ${api.nodeToken}` }, signal: AbortSignal.timeout(15_000) });
  if (!res.ok) throw new Error(`the API answered ${res.status}`);
  return ((await res.json()) as { uploads: PendingUploadJson[] }).uploads;
}

/** A node's uploads, reporting to the API with its node token and noting each in its attempt's history. */
export function nodeUploads(store: ObjectStore, api: Parameters<typeof reportStored>[0], warn: (msg: string) => void): CheckpointUploads {
  return new CheckpointUploads({
    store,
    report: (spec, body) => reportStored(api, spec, body),
    warn,
    note: (spec, message, level) => reportAttemptEvent(api, spec, { kind: 'checkpoint.stored', level, message }),
  });
}

/** One checkpoint of the node not stored yet, as GET /nodes/:id/checkpoints/pending lists it. */
export interface PendingUploadJson {
  job_id: string;
  attempt: number;
  run_id: string;
  uri: string;
  fingerprint: string;
  project: string | null;
  run_as: (JobUser & { source: 'pool' | 'admin'; slot: number | null }) | null;
}

/**
 * Takes up again the uploads of the node's checkpoints still pending (an agent that stopped,
 * or was killed, midway; a checkpoint registered late, after its attempt's watcher stopped):
 * asks the API for them as the agent starts and every `everyMs` after, asking again sooner while
 * the API is away, and queues each one not queued yet as its project's user. Files gone from the
 * node fail their upload, which is said. Runs as long as the agent does.
 */
export async function takeUpPendingUploads(uploads: CheckpointUploads, list: () => Promise<PendingUploadJson[]>, userOf: (p: PendingUploadJson) => RunAs | null, warn: (msg: string) => void, everyMs = 60_000): Promise<never> {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());
  for (let wait = 500; ; ) {
    let pending: PendingUploadJson[];
    try {
      pending = await list();
      wait = 500;
    } catch (err) {
      warn(`the node's pending checkpoint uploads could not be listed (${(err as Error).message}); asking again in ${wait / 1000} s`);
      await sleep(wait);
      wait = Math.min(wait * 2, everyMs);
      continue;
    }
    for (const p of pending) {
      let user: RunAs | null;
      try {
        user = userOf(p);
      } catch (err) {
        warn(`checkpoint ${p.uri} of ${p.job_id}#${p.attempt} is not taken up again: ${(err as Error).message}`);
        continue;
      }
      uploads.add({ jobId: p.job_id, attempt: p.attempt, runId: p.run_id }, { uri: p.uri, fingerprint: p.fingerprint }, user);
    }
    await sleep(everyMs);
  }
}
