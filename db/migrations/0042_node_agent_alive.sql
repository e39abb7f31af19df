ALTER TABLE "nodes" ADD COLUMN "agent_alive" boolean;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "agent_alive_at" timestamp with time zone;