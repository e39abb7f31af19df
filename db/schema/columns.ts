/** Column helpers every table file shares. */
import { sql, type SQL } from 'drizzle-orm';
import { customType, timestamp } from 'drizzle-orm/pg-core';

export const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => 'bytea' });
export const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();
export const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/**
 * A constant list as SQL literals, `'A', 'B'`, for a check constraint made from a domain list: the
 * constraint's text must not change while the list does not, or drizzle-kit sees a new migration.
 */
export const literalList = (values: readonly string[]): SQL => sql.raw(values.map((v) => `'${v.replaceAll("'", "''")}'`).join(', '));
