/**
 * The API's own types, read from its TypeBox schemas: a field renamed in api/schemas breaks the
 * console's type check, not the page. These are type-only imports: nothing of the API's code is
 * bundled.
 */
import type { Static } from '@sinclair/typebox';
import type { BestSchema, CheckpointDetailSchema, CheckpointListSchema, ListCheckpointsQuery, ResolvedMetricSchema } from '../../api/schemas/checkpoints.ts';
import type { ChangeEvent, ChangeTopic, ConsoleInfo } from '../../api/schemas/console.ts';
import type { EvaluationSchema, StartEvaluationBody } from '../../api/schemas/evaluations.ts';
import type { LineageQuery, LineageSchema } from '../../api/schemas/fork.ts';
import type { JobCounts, JobCountsQuery, RunCounts } from '../../api/schemas/job-counts.ts';
import type { AttemptSchema, JobDetailSchema, JobSchema, JobStateSchema, ListJobsQuery, RetryBody, SubmitJobBody, TransitionSchema } from '../../api/schemas/jobs.ts';
import type { NodeSchema, SlotSchema } from '../../api/schemas/nodes.ts';
import type { ProjectIdentitySchema, ProjectListSchema } from '../../api/schemas/project-users.ts';
import type { QuotaLineSchema, QuotaListSchema } from '../../api/schemas/quotas.ts';
import type { RegisterCheckpointBody, RegisteredVersionSchema } from '../../api/schemas/registry.ts';
import type { CompareQuery, EventSchema, ListRunsQuery, MetricsQuery, MetricValue, RunDetailSchema, RunMetricsSchema, RunSchema, SeriesSchema, SummarySchema } from '../../api/schemas/runs.ts';
import type { SweepDetailSchema, SweepListQuery, SweepSchema, SweepTrialSchema } from '../../api/schemas/sweeps.ts';
import type { WhoAmISchema } from '../../api/schemas/tokens.ts';

export type { ChangeEvent, ChangeTopic, ConsoleInfo, JobCounts, JobCountsQuery, RetryBody, RunCounts, StartEvaluationBody, SubmitJobBody };
export type RegisterBody = Static<typeof RegisterCheckpointBody>;
export type RegisteredVersion = Static<typeof RegisteredVersionSchema>;
export type Job = Static<typeof JobSchema>;
export type JobState = Static<typeof JobStateSchema>;
export type JobDetail = Static<typeof JobDetailSchema>;
export type Attempt = Static<typeof AttemptSchema>;
export type Transition = Static<typeof TransitionSchema>;
export type ListJobsQuery = Static<typeof ListJobsQuery>;
export type GpuNode = Static<typeof NodeSchema>;
export type Slot = Static<typeof SlotSchema>;
export type QuotaLine = Static<typeof QuotaLineSchema>;
export type QuotaList = Static<typeof QuotaListSchema>;
export type ProjectList = Static<typeof ProjectListSchema>;
export type ProjectIdentity = Static<typeof ProjectIdentitySchema>;
export type Run = Static<typeof RunSchema>;
export type RunDetail = Static<typeof RunDetailSchema>;
export type ListRunsQuery = Static<typeof ListRunsQuery>;
export type RunMetrics = Static<typeof RunMetricsSchema>;
export type Series = Static<typeof SeriesSchema>;
export type Summary = Static<typeof SummarySchema>;
export type MetricsQuery = Static<typeof MetricsQuery>;
export type CompareQuery = Static<typeof CompareQuery>;
export type WireValue = Static<typeof MetricValue>;
export type RunEvent = Static<typeof EventSchema>;
export type CheckpointList = Static<typeof CheckpointListSchema>;
export type ListedCheckpoint = CheckpointList['checkpoints'][number];
export type CheckpointDetail = Static<typeof CheckpointDetailSchema>;
export type CheckpointsQuery = Static<typeof ListCheckpointsQuery>;
export type Best = Static<typeof BestSchema>;
export type ResolvedMetric = Static<typeof ResolvedMetricSchema>;
export type Evaluation = Static<typeof EvaluationSchema>;
export type WhoAmI = Static<typeof WhoAmISchema>;
export type Sweep = Static<typeof SweepSchema>;
export type SweepDetail = Static<typeof SweepDetailSchema>;
export type SweepTrial = Static<typeof SweepTrialSchema>;
export type SweepsQuery = Static<typeof SweepListQuery>;
export type Lineage = Static<typeof LineageSchema>;
export type LineageRun = Lineage['runs'][number];
export type LineageQuery = Static<typeof LineageQuery>;

/**
 * One entry of a folder of a run's artifacts, as MLflow's list-artifacts answers it
 * (api/mlflow/artifacts.ts): MLflow's protocol has no TypeBox schema of ours, MLflow documents it.
 * `path` is the entry's name within the folder listed.
 */
export interface ArtifactFile {
  path: string;
  is_dir: boolean;
  file_size?: number;
}
export interface ArtifactList {
  files?: ArtifactFile[];
}

/** A metric value as a number: the wire spells NaN and ±Infinity as strings. */
export function num(v: WireValue | null | undefined): number | null {
  if (v === null || v === undefined) return null;
  return typeof v === 'number' ? v : Number(v);
}
