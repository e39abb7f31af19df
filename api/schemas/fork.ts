import { Type, type Static } from '@sinclair/typebox';
import { Nullable } from './common.ts';
import { CODE_OR_WORKING_DIR, exactlyOne } from './rules.ts';
import { ChangeSchema, JobSchema, RETRY_GPUS_RULE, RetryBody } from './jobs.ts';
import { CheckpointOfRun, RunStatusSchema } from './runs.ts';

export const ForkBody = Type.Object(
  {
    ...RetryBody.properties,
    project: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "the new job's project; default the checkpoint's job's" })),
    experiment: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "the new job's experiment; default the checkpoint's job's (with project: none)" })),
  },
  {
    additionalProperties: false,
    allOf: [RETRY_GPUS_RULE, CODE_OR_WORKING_DIR],
    description:
      "A new TRAIN job from the checkpoint: the config of the attempt that registered it (command, working_dir or code, env, params, cards, selector, priority) edited as POST /jobs/:id/retry edits one (env and params merged key by key, the rest replaced), and its job's watch_dir, eval_policy, lost, stall and preemption policies. It resumes from the checkpoint (GPUPLANE_RESUME_FROM), and its run records it as forked_from",
  },
);
export type ForkBody = Static<typeof ForkBody>;

const ForkPoint = CheckpointOfRun;

/** A change at a fork, against what the parent job was given; for a param, what the parent's run logged beside it. */
const ForkChangeSchema = Type.Object({
  ...ChangeSchema.properties,
  run_logged: Type.Optional(Type.Unknown({ description: "for a params.X key: the value the checkpoint's run logged for X (its script's default where the job gave none); absent where it logged none" })),
});

export const ForkedJobSchema = Type.Intersect([
  Type.Omit(JobSchema, []),
  Type.Object({
    forked_from: ForkPoint,
    changes: Type.Array(ForkChangeSchema, { description: "what the edits changed from the config of the checkpoint's attempt (what its job was given)" }),
  }),
]);

export const LineageQuery = Type.Object(
  {
    run: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'a run of the tree' })),
    checkpoint: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'a checkpoint of a run of the tree' })),
  },
  { additionalProperties: false, ...exactlyOne(['run', 'checkpoint'], 'give exactly one of run and checkpoint') },
);

export const LineageCheckpointSchema = Type.Object({
  id: Type.String(),
  step: Nullable(Type.Integer()),
  parent_checkpoint_id: Nullable(Type.String()),
  deleted_at: Nullable(Type.String({ format: 'date-time', description: 'when retention deleted its files: it can no longer be forked' })),
});

export const LineageRunSchema = Type.Object({
  id: Type.String(),
  name: Nullable(Type.String()),
  project: Nullable(Type.String()),
  experiment: Nullable(Type.String()),
  job_id: Nullable(Type.String()),
  attempt: Nullable(Type.Integer()),
  status: RunStatusSchema,
  depth: Type.Integer({ description: 'forks from the root run: 0 for the root' }),
  forked_from: Nullable(ForkPoint),
  changes: Type.Array(ForkChangeSchema, { description: "the config diff at the branch: from the attempt that registered forked_from to this run's attempt; empty for the root" }),
  checkpoints: Type.Array(LineageCheckpointSchema, { description: 'by step' }),
});

export const LineageSchema = Type.Object({
  root_run_id: Type.String({ description: 'the run the tree starts from: the one the asked-for run descends from that forked from no other' }),
  runs: Type.Array(LineageRunSchema, { description: 'depth first from the root, each run before its forks (oldest first); runs of projects the caller may not read are left out, with their forks' }),
});
