ALTER TABLE "runs" DROP CONSTRAINT "runs_external_key_unique";--> statement-breakpoint
CREATE UNIQUE INDEX "runs_project_external_key" ON "runs" USING btree ("project_id","external_key");--> statement-breakpoint
ALTER TABLE "idempotency_keys" ADD COLUMN "scope" text DEFAULT '' NOT NULL;--> statement-breakpoint
-- Keys already taken belong to the project of the job they made.
UPDATE "idempotency_keys" SET "scope" = coalesce((SELECT "project_id" FROM "jobs" WHERE "jobs"."id" = "idempotency_keys"."job_id"), '');--> statement-breakpoint
ALTER TABLE "idempotency_keys" DROP CONSTRAINT "idempotency_keys_pkey";--> statement-breakpoint
ALTER TABLE "idempotency_keys" ADD CONSTRAINT "idempotency_keys_scope_key_pk" PRIMARY KEY("scope","key");
