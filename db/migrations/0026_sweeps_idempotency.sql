ALTER TABLE "sweeps" ADD COLUMN "idempotency_key" text;--> statement-breakpoint
ALTER TABLE "sweeps" ADD COLUMN "request_hash" text;--> statement-breakpoint
CREATE UNIQUE INDEX "sweeps_idempotency_key" ON "sweeps" USING btree (coalesce("project_id", ''),"idempotency_key") WHERE "sweeps"."idempotency_key" is not null;