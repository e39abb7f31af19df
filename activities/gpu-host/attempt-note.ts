import type { WatchNote } from './checkpoint-watching.ts';

/** An event of an attempt that its node reports (POST /jobs/:id/attempts/:n/events): its checkpoint watcher's, its fetch of the job's code (code-fetch.ts), its build of the job's Python environment (python-env.ts), or its pull of the job's image (image-pull.ts). */
export type AttemptNote = Omit<WatchNote, 'kind'> & { kind: WatchNote['kind'] | 'code.fetched' | 'env.built' | 'image.pulled' };
