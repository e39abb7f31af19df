import { Type } from '@sinclair/typebox';
import { Nullable } from './common.ts';

/** A pool as written: one label pair `key=value` (the nodes with that label). */
const POOL_PATTERN = '^[A-Za-z0-9_.\\-/]+=[A-Za-z0-9_.\\-/]+$';
const Pool = Type.String({ minLength: 3, maxLength: 200, pattern: POOL_PATTERN, description: 'a pool: one label pair key=value (the nodes labelled so; a job counts against it when its selector names that pair); absent: the whole cluster' });

export const QuotaBody = Type.Object(
  {
    gpus: Type.Integer({ minimum: 0, maximum: 100000, description: "the project's guaranteed cards: its jobs within it are served before those of any project over its quota" }),
    pool: Type.Optional(Pool),
  },
  { additionalProperties: false },
);

export const QuotaQuery = Type.Object({ pool: Type.Optional(Pool) }, { additionalProperties: false });

export const QuotaLineSchema = Type.Object({
  project: Type.String(),
  pool: Nullable(Type.String({ description: 'the pool (key=value); null: the whole cluster' })),
  gpus: Nullable(Type.Integer({ description: 'guaranteed cards; null: no quota (a guarantee of 0), a project that holds or wants cards all the same' })),
  in_use: Type.Integer({ description: 'cards its jobs that count against this quota hold now' }),
  borrowed: Type.Integer({ description: 'cards in use beyond the quota: idle cards lent by other projects' }),
  queued_jobs: Type.Integer({ description: 'its QUEUED jobs that count against this quota' }),
  queued_cards: Type.Integer({ description: 'the cards they want in all' }),
  usage_card_hours: Type.Number({ description: "the project's recent usage: card-hours, each weighed by 2^(-age / half-life)" }),
  fair_share: Type.Number({ description: "the project's fair-share factor, 2^(-U) with U its part of all recent usage: 1 none, 0.5 all of it; between projects both over (or both under) quota, the higher goes first" }),
});

export const QuotaListSchema = Type.Object({
  half_life_h: Type.Number({ description: 'the half-life of usage (GPUPLANE_FAIRSHARE_HALF_LIFE_H)' }),
  quotas: Type.Array(QuotaLineSchema),
});
