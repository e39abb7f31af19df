ALTER TABLE "checkpoints" ADD COLUMN "storage" text;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD COLUMN "storage_reason" text;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD COLUMN "store_key" text;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD COLUMN "stored_bytes" bigint;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD COLUMN "stored_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD CONSTRAINT "checkpoints_storage" CHECK ("checkpoints"."storage" is null or "checkpoints"."storage" in ('pending', 'stored', 'failed'));