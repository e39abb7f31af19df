CREATE TABLE "log_chunks" (
	"job_id" text NOT NULL,
	"attempt" integer NOT NULL,
	"stream" text NOT NULL,
	"offset" bigint NOT NULL,
	"data" "bytea" NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "log_chunks_job_id_attempt_stream_offset_pk" PRIMARY KEY("job_id","attempt","stream","offset")
);
--> statement-breakpoint
CREATE TABLE "metric_chunks" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" text NOT NULL,
	"key" text NOT NULL,
	"step_min" bigint NOT NULL,
	"step_max" bigint NOT NULL,
	"count" integer NOT NULL,
	"stride" bigint,
	"steps" "bytea" NOT NULL,
	"values" "bytea" NOT NULL,
	"times" "bytea" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "metric_rollups" (
	"run_id" text NOT NULL,
	"key" text NOT NULL,
	"width" integer NOT NULL,
	"bucket" bigint NOT NULL,
	"count" integer NOT NULL,
	"nan_count" integer NOT NULL,
	"min" double precision,
	"max" double precision,
	"sum" double precision NOT NULL,
	CONSTRAINT "metric_rollups_run_id_key_width_bucket_pk" PRIMARY KEY("run_id","key","width","bucket")
);
--> statement-breakpoint
CREATE TABLE "metric_summaries" (
	"run_id" text NOT NULL,
	"key" text NOT NULL,
	"count" bigint NOT NULL,
	"nan_count" bigint NOT NULL,
	"first_step" bigint NOT NULL,
	"last_step" bigint NOT NULL,
	"last" double precision NOT NULL,
	"min" double precision,
	"min_step" bigint,
	"max" double precision,
	"max_step" bigint,
	CONSTRAINT "metric_summaries_run_id_key_pk" PRIMARY KEY("run_id","key")
);
--> statement-breakpoint
CREATE TABLE "run_log_refs" (
	"job_id" text NOT NULL,
	"attempt" integer NOT NULL,
	"stream" text NOT NULL,
	"run_id" text,
	"node_id" text,
	"location" text,
	"size_bytes" bigint DEFAULT 0 NOT NULL,
	"complete" boolean DEFAULT false NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "run_log_refs_job_id_attempt_stream_pk" PRIMARY KEY("job_id","attempt","stream")
);
--> statement-breakpoint
DROP INDEX "checkpoints_run_fingerprint";--> statement-breakpoint
ALTER TABLE "checkpoints" ALTER COLUMN "step" SET DATA TYPE bigint;--> statement-breakpoint
ALTER TABLE "checkpoints" ALTER COLUMN "size_bytes" SET DATA TYPE bigint;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD COLUMN "job_id" text;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD COLUMN "attempt" integer;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD COLUMN "node_id" text;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD COLUMN "deleted_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "evaluations" ADD COLUMN "reason" text;--> statement-breakpoint
ALTER TABLE "evaluations" ADD COLUMN "ended_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "idempotency_key" text;--> statement-breakpoint
ALTER TABLE "experiments" ADD COLUMN "keep_best" integer;--> statement-breakpoint
ALTER TABLE "experiments" ADD COLUMN "keep_latest" integer;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "watch_dir" text;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "resume_from" text;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "eval_policy" jsonb;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "checkpoint_id" text;--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "parent_job_id" text;--> statement-breakpoint
ALTER TABLE "log_chunks" ADD CONSTRAINT "log_chunks_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "metric_chunks" ADD CONSTRAINT "metric_chunks_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "metric_rollups" ADD CONSTRAINT "metric_rollups_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "metric_summaries" ADD CONSTRAINT "metric_summaries_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "run_log_refs" ADD CONSTRAINT "run_log_refs_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "run_log_refs" ADD CONSTRAINT "run_log_refs_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "metric_chunks_run_key_step" ON "metric_chunks" USING btree ("run_id","key","step_min");--> statement-breakpoint
ALTER TABLE "checkpoints" ADD CONSTRAINT "checkpoints_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "checkpoints_run_uri_fingerprint" ON "checkpoints" USING btree ("run_id","uri","fingerprint");--> statement-breakpoint
CREATE INDEX "checkpoints_run" ON "checkpoints" USING btree ("run_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "evaluations_job" ON "evaluations" USING btree ("job_id");--> statement-breakpoint
CREATE INDEX "evaluations_checkpoint" ON "evaluations" USING btree ("checkpoint_id");--> statement-breakpoint
CREATE UNIQUE INDEX "events_run_idempotency_key" ON "events" USING btree ("run_id","idempotency_key");