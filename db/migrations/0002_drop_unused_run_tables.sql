ALTER TABLE "metric_points" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "metric_rollups" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
ALTER TABLE "run_log_refs" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP TABLE "metric_points" CASCADE;--> statement-breakpoint
DROP TABLE "metric_rollups" CASCADE;--> statement-breakpoint
DROP TABLE "run_log_refs" CASCADE;--> statement-breakpoint
ALTER TABLE "events" ALTER COLUMN "run_id" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "job_id" text;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "attempt" integer;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "level" text DEFAULT 'info' NOT NULL;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "tags" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "system_tags" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "external_key" text;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "started_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "heartbeat_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "events_job" ON "events" USING btree ("job_id","id");--> statement-breakpoint
CREATE INDEX "runs_created" ON "runs" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "runs_running_heartbeat" ON "runs" USING btree ("heartbeat_at") WHERE "runs"."status" = 'running';--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_external_key_unique" UNIQUE("external_key");--> statement-breakpoint
UPDATE "runs" SET "status" = CASE "status" WHEN 'RUNNING' THEN 'running' WHEN 'SUCCEEDED' THEN 'finished' WHEN 'FAILED' THEN 'failed' WHEN 'CANCELLED' THEN 'cancelled' ELSE 'crashed' END WHERE "status" NOT IN ('running', 'finished', 'failed', 'crashed', 'cancelled');--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_status_known" CHECK ("runs"."status" in ('running', 'finished', 'failed', 'crashed', 'cancelled'));