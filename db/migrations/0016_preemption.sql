ALTER TABLE "job_attempts" ADD COLUMN "preempt_requested_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "job_attempts" ADD COLUMN "preempt_reason" text;--> statement-breakpoint
ALTER TABLE "job_attempts" ADD COLUMN "preempt_for" text;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "preemptible" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "preempt_grace_s" integer;