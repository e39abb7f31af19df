CREATE TABLE "peer_reports" (
	"witness_id" text NOT NULL,
	"subject_id" text NOT NULL,
	"last_heard_at" timestamp with time zone NOT NULL,
	"received_at" timestamp with time zone NOT NULL,
	CONSTRAINT "peer_reports_witness_id_subject_id_pk" PRIMARY KEY("witness_id","subject_id")
);
--> statement-breakpoint
ALTER TABLE "job_attempts" ADD COLUMN "fenced_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "peer_addr" text;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "reported_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "peer_verdict" text;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "peer_verdict_reason" text;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "peer_verdict_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "peer_ignored" jsonb;--> statement-breakpoint
ALTER TABLE "plane_identity" ADD COLUMN "peer_secret" text;