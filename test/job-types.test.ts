import { readdirSync, readFileSync } from 'node:fs';
import { PgDialect, getTableConfig } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { jobs } from '../db/schema.ts';
import { EVALUATION_JOB_TYPE, JOB_TYPE_TRAITS, JOB_TYPES, TRAINING_JOB_TYPE } from '../domain/job-types.ts';

const migrations = new URL('../db/migrations/meta/', import.meta.url);

describe('the job types, written once', () => {
  it('gives every type a row of traits, and the roles to one type each', () => {
    expect(Object.keys(JOB_TYPE_TRAITS).sort()).toEqual([...JOB_TYPES].sort());
    expect(EVALUATION_JOB_TYPE).toBe('EVALUATE');
    expect(TRAINING_JOB_TYPE).toBe('TRAIN');
    // A job that evaluates a checkpoint writes its result to a run of its own.
    for (const t of JOB_TYPES) if (JOB_TYPE_TRAITS[t].evaluatesCheckpoint) expect(JOB_TYPE_TRAITS[t].hasRun, t).toBe(true);
  });

  it("keeps the database's check of the types in step with the newest migration", () => {
    // A new type changes the schema's constraint; until its migration is generated, this fails.
    const check = getTableConfig(jobs).checks.find((c) => c.name === 'jobs_type_known');
    const made = new PgDialect().sqlToQuery(check!.value).sql;
    expect(made).toBe(`"jobs"."type" in (${JOB_TYPES.map((t) => `'${t}'`).join(', ')})`);
    const newest = readdirSync(migrations).filter((f) => f.endsWith('_snapshot.json')).sort().at(-1)!;
    const snapshot = JSON.parse(readFileSync(new URL(newest, migrations), 'utf8')) as { tables: Record<string, { checkConstraints: Record<string, { value: string }> }> };
    expect(snapshot.tables['public.jobs'].checkConstraints.jobs_type_known.value).toBe(made);
  });
});
