import { Type, type Static } from '@sinclair/typebox';
import { JOB_STATES } from '../../domain/job-states.ts';
import { Nullable } from './common.ts';
import { ListJobsQuery } from './jobs.ts';

const Time = Type.String({ format: 'date-time' });

export const JobCountsQuery = Type.Object(
  {
    type: ListJobsQuery.properties.type,
    project: ListJobsQuery.properties.project,
  },
  { additionalProperties: false },
);
export type JobCountsQuery = Static<typeof JobCountsQuery>;

/** Every state is present, 0 where no job is in it. */
export const JobCountsSchema = Type.Object({
  total: Type.Integer({ description: 'all jobs that match the filters' }),
  states: Type.Object(Object.fromEntries(JOB_STATES.map((s) => [s, Type.Integer()])), {
    description: 'how many jobs are in each state',
    additionalProperties: false,
  }),
});
export type JobCounts = Static<typeof JobCountsSchema>;

/** The experiment index: every project/experiment with runs, counted over all of them. */
export const RunCountsSchema = Type.Object({
  experiments: Type.Array(
    Type.Object({
      project: Type.String(),
      experiment: Nullable(Type.String()),
      runs: Type.Integer(),
      running: Type.Integer(),
      latest: Time,
    }),
    { description: 'latest run first' },
  ),
});
export type RunCounts = Static<typeof RunCountsSchema>;
