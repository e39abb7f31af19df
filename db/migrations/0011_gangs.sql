ALTER TABLE "job_attempts" ADD COLUMN "members" jsonb;--> statement-breakpoint
ALTER TABLE "job_attempts" ADD COLUMN "master_port" integer;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "nodes" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "members" jsonb;--> statement-breakpoint
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_nodes_positive" CHECK ("jobs"."nodes" >= 1);