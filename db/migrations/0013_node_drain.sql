ALTER TABLE "nodes" ADD COLUMN "drained_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "drain_reason" text;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "drained_by" text;