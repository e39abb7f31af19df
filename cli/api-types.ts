/**
 * The API's own types, read from its TypeBox schemas as the console's web/src/types.ts reads
 * them: a field renamed in api/schemas breaks the CLI's type check, not a command. These are
 * type-only imports, so gpuctl loads none of the API's code.
 */
import type { Static } from '@sinclair/typebox';
import type { BestSchema, CheckpointDetailSchema, CheckpointListSchema, CheckpointSchema, ResolvedMetricSchema } from '../api/schemas/checkpoints.ts';
import type { EvaluationSchema, StartEvaluationBody } from '../api/schemas/evaluations.ts';
import type { ForkBody, ForkedJobSchema, LineageSchema } from '../api/schemas/fork.ts';
import type { JobDetailSchema, JobSchema, RetryBody, SubmitJobBody } from '../api/schemas/jobs.ts';
import type { LogRefSchema } from '../api/schemas/logs.ts';
import type { NodeSchema } from '../api/schemas/nodes.ts';
import type { NodeEnvsAnswer } from '../api/schemas/node-envs.ts';
import type { PrimaryMetricAnswer as PrimaryMetricSchema, RetentionSchema, StallAfterSchema } from '../api/schemas/projects.ts';
import type { CreateRunBody, EventSchema, MetricsWritten, MetricValue, RunDetailSchema, RunMetricsSchema, RunSchema, SeriesSchema, SummarySchema } from '../api/schemas/runs.ts';
import type { QuotaLineSchema, QuotaListSchema } from '../api/schemas/quotas.ts';
import type { SweepDetailSchema, SweepSchema, SweepTrialSchema } from '../api/schemas/sweeps.ts';
import type { CreatedTokenSchema, TokenSchema, WhoAmISchema } from '../api/schemas/tokens.ts';

export type { CreateRunBody, ForkBody, RetryBody, StartEvaluationBody, SubmitJobBody };

export type JobJson = Static<typeof JobSchema>;
export type JobDetailJson = Static<typeof JobDetailSchema>;
export type NodeJson = Static<typeof NodeSchema>;
export type NodeEnvsJson = Static<typeof NodeEnvsAnswer>;

export type RunJson = Static<typeof RunSchema>;
export type RunDetailJson = Static<typeof RunDetailSchema>;
export type SummaryJson = Static<typeof SummarySchema>;
export type SeriesJson = Static<typeof SeriesSchema>;
export type RunMetricsJson = Static<typeof RunMetricsSchema>;
/** A metric value on the wire: a number, or "NaN" / "Infinity" / "-Infinity" (JSON has none of them). */
export type WireValue = Static<typeof MetricValue>;
export type MetricsWrittenJson = Static<typeof MetricsWritten>;
export type EventJson = Static<typeof EventSchema>;

export type CheckpointJson = Static<typeof CheckpointSchema>;
export type ListedCheckpointJson = Static<typeof CheckpointListSchema>['checkpoints'][number];
export type CheckpointDetailJson = Static<typeof CheckpointDetailSchema>;
export type BestJson = Static<typeof BestSchema>;
export type ResolvedMetricJson = Static<typeof ResolvedMetricSchema>;
export type EvaluationJson = Static<typeof EvaluationSchema>;
export type ForkedJobJson = Static<typeof ForkedJobSchema>;
export type LineageJson = Static<typeof LineageSchema>;
export type RetentionJson = Static<typeof RetentionSchema>;
export type PrimaryMetricJson = Static<typeof PrimaryMetricSchema>;

export type LogRefJson = Static<typeof LogRefSchema>;

export type TokenJson = Static<typeof TokenSchema>;
export type CreatedTokenJson = Static<typeof CreatedTokenSchema>;
export type WhoAmIJson = Static<typeof WhoAmISchema>;

export type QuotaLineJson = Static<typeof QuotaLineSchema>;
export type QuotaListJson = Static<typeof QuotaListSchema>;
export type StallAfterJson = Static<typeof StallAfterSchema>;

export type { CreateWebhookBody } from '../api/schemas/webhooks.ts';
import type { CreatedWebhookSchema, WebhookListSchema, WebhookSchema, WebhookTestSchema } from '../api/schemas/webhooks.ts';
export type WebhookJson = Static<typeof WebhookSchema>;
export type CreatedWebhookJson = Static<typeof CreatedWebhookSchema>;
export type WebhookListJson = Static<typeof WebhookListSchema>;
export type WebhookTestJson = Static<typeof WebhookTestSchema>;

export type SweepJson = Static<typeof SweepSchema>;
export type SweepDetailJson = Static<typeof SweepDetailSchema>;
export type SweepTrialJson = Static<typeof SweepTrialSchema>;

export type { ProjectIdentityJson, ProjectListJson } from '../api/schemas/project-users.ts';
