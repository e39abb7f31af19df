ALTER TABLE "jobs" ADD COLUMN "memory_mb" integer;--> statement-breakpoint
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_memory_mb_positive" CHECK ("jobs"."memory_mb" >= 1);