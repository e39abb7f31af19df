/**
 * The job types, and what differs between them, as data. Code that behaves differently by type
 * asks a trait of JOB_TYPE_TRAITS instead of naming a type, so a new type is one row here and the
 * compiler points at nothing else (docs/extending.md, "A job type"). Every list of the types (the
 * API's TypeBox union, `gpuctl --type` choices, the console's form, the `jobs_type_known` check
 * constraint) is made from JOB_TYPES.
 */
export const JOB_TYPES = ['TRAIN', 'EVALUATE', 'CUSTOM'] as const;
export type JobType = (typeof JOB_TYPES)[number];

/** What a job of one type gets from the plane. */
export interface JobTypeTraits {
  /**
   * Each attempt gets a run of its own (params, metrics, checkpoints), made when the attempt begins
   * (activities/control/begin.ts). A job without one logs nothing the plane charts, and its
   * watcher's checkpoints are not registered: a checkpoint belongs to a run.
   */
  hasRun: boolean;
  /**
   * Flagged stalled after its project's or the plane's default stall-after when the job sets none
   * (domain/stall.ts, stallAfterOf). Without it, only a stall-after of its own applies: a service
   * that waits quietly is not hung.
   */
  stallByDefault: boolean;
  /**
   * The job evaluates one checkpoint (its `checkpoint_id`), usually for the training job that
   * registered it (`parent_job_id`): its result is its stdout's metrics line
   * (activities/control/finish.ts), its run says what it evaluates (db/queries/runs.ts), the
   * retention it triggers is that of the evaluated checkpoint's run
   * (activities/control/checkpoints.ts), and it is the job createEvaluationJob makes. Exactly one
   * type has it: EVALUATION_JOB_TYPE.
   */
  evaluatesCheckpoint: boolean;
  /**
   * The type of the training jobs the plane makes itself (a sweep's trials, a fork of a checkpoint)
   * and of a submit that names none (POST /jobs, `gpuctl submit`). Exactly one type has it:
   * TRAINING_JOB_TYPE.
   */
  trains: boolean;
}

export const JOB_TYPE_TRAITS: Readonly<Record<JobType, Readonly<JobTypeTraits>>> = {
  TRAIN: { hasRun: true, stallByDefault: true, evaluatesCheckpoint: false, trains: true },
  EVALUATE: { hasRun: true, stallByDefault: true, evaluatesCheckpoint: true, trains: false },
  CUSTOM: { hasRun: false, stallByDefault: false, evaluatesCheckpoint: false, trains: false },
};

type RoleTrait = 'evaluatesCheckpoint' | 'trains';

/** The one type with the trait; a table that gives it to none or to two fails at load, not in a query. */
function theTypeThat(trait: RoleTrait): JobType {
  const found = JOB_TYPES.filter((t) => JOB_TYPE_TRAITS[t][trait]);
  if (found.length !== 1) throw new Error(`JOB_TYPE_TRAITS: exactly one job type must have ${trait}, not ${found.length}`);
  return found[0];
}

/** The type of a checkpoint's evaluation (EVALUATE). */
export const EVALUATION_JOB_TYPE: JobType = theTypeThat('evaluatesCheckpoint');

/** The type of the plane's own training jobs and of a submit that names none (TRAIN). */
export const TRAINING_JOB_TYPE: JobType = theTypeThat('trains');
