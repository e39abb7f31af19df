import { sql } from 'drizzle-orm';
import { boolean, check, pgTable, text } from 'drizzle-orm/pg-core';
import { createdAt } from './columns.ts';

/**
 * Which plane this database is: one row, made by the first control worker. The plane claims its
 * Temporal namespace with this id (temporal/setup.ts claimNamespace), so that a second plane's
 * workers never poll a namespace that carries another database's jobs.
 */
export const planeIdentity = pgTable(
  'plane_identity',
  {
    only: boolean('only').primaryKey().default(true),
    planeId: text('plane_id').notNull(),
    /** The secret the peer channel's keys are derived from (db/queries/peers.ts peerKeyOf); made by the first API that needs it. */
    peerSecret: text('peer_secret'),
    createdAt: createdAt(),
  },
  (t) => [check('plane_identity_one_row', sql`${t.only}`)],
);
