ALTER TABLE "runs" DROP CONSTRAINT "runs_source_known";--> statement-breakpoint
ALTER TABLE "experiments" ADD COLUMN "tags" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "experiments" ADD COLUMN "deleted_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "deleted_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_source_known" CHECK ("runs"."source" in ('job', 'sdk', 'import', 'mlflow'));