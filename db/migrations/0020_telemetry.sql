ALTER TABLE "job_attempts" ADD COLUMN "preempt_fails" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "job_attempts" ADD COLUMN "stall_marks" jsonb;--> statement-breakpoint
ALTER TABLE "job_attempts" ADD COLUMN "stalled_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "stall_after_s" integer;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "on_stall" text DEFAULT 'tell' NOT NULL;