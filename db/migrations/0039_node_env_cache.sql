ALTER TABLE "nodes" ADD COLUMN "env_cache" jsonb;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "env_cache_at" timestamp with time zone;