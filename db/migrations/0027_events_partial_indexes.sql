DROP INDEX "events_run";--> statement-breakpoint
DROP INDEX "events_run_idempotency_key";--> statement-breakpoint
CREATE INDEX "events_run" ON "events" USING btree ("run_id","id") WHERE "events"."run_id" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "events_run_idempotency_key" ON "events" USING btree ("run_id","idempotency_key") WHERE "events"."idempotency_key" is not null;