CREATE TABLE "checkpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"run_id" text NOT NULL,
	"parent_checkpoint_id" text,
	"step" integer,
	"uri" text NOT NULL,
	"fingerprint" text NOT NULL,
	"size_bytes" integer,
	"train_metrics" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "evaluations" (
	"id" text PRIMARY KEY NOT NULL,
	"checkpoint_id" text NOT NULL,
	"job_id" text,
	"status" text NOT NULL,
	"metrics" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" text NOT NULL,
	"kind" text NOT NULL,
	"message" text NOT NULL,
	"data" jsonb,
	"at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "experiments" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"primary_metric" text,
	"primary_metric_mode" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "gpu_slots" (
	"node_id" text NOT NULL,
	"index" integer NOT NULL,
	"uuid" text NOT NULL,
	"name" text NOT NULL,
	"memory_mb" integer NOT NULL,
	"owner_job_id" text,
	"owner_attempt" integer,
	"present" integer DEFAULT 1 NOT NULL,
	CONSTRAINT "gpu_slots_node_id_index_pk" PRIMARY KEY("node_id","index"),
	CONSTRAINT "gpu_slots_owner_pair" CHECK (("gpu_slots"."owner_job_id" is null) = ("gpu_slots"."owner_attempt" is null))
);
--> statement-breakpoint
CREATE TABLE "job_attempts" (
	"job_id" text NOT NULL,
	"attempt" integer NOT NULL,
	"config" jsonb NOT NULL,
	"state" text NOT NULL,
	"node_id" text,
	"gpu_indices" jsonb,
	"pid" integer,
	"log_path" text,
	"exit_code" integer,
	"signal" text,
	"reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"ended_at" timestamp with time zone,
	CONSTRAINT "job_attempts_job_id_attempt_pk" PRIMARY KEY("job_id","attempt")
);
--> statement-breakpoint
CREATE TABLE "job_transitions" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"job_id" text NOT NULL,
	"attempt" integer NOT NULL,
	"from_state" text,
	"to_state" text NOT NULL,
	"detail" text,
	"at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "jobs" (
	"id" text PRIMARY KEY NOT NULL,
	"type" text NOT NULL,
	"state" text NOT NULL,
	"project_id" text,
	"experiment_id" text,
	"priority" integer DEFAULT 0 NOT NULL,
	"gpus" integer NOT NULL,
	"selector" jsonb NOT NULL,
	"command" jsonb NOT NULL,
	"working_dir" text NOT NULL,
	"env" jsonb NOT NULL,
	"params" jsonb NOT NULL,
	"on_lost" text DEFAULT 'requeue' NOT NULL,
	"max_lost_requeues" integer DEFAULT 3 NOT NULL,
	"lost_count" integer DEFAULT 0 NOT NULL,
	"attempt" integer DEFAULT 1 NOT NULL,
	"node_id" text,
	"gpu_indices" jsonb,
	"exit_code" integer,
	"signal" text,
	"reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"queued_at" timestamp with time zone,
	"started_at" timestamp with time zone,
	"ended_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "jobs_gpus_nonnegative" CHECK ("jobs"."gpus" >= 0),
	CONSTRAINT "jobs_type_known" CHECK ("jobs"."type" in ('TRAIN', 'EVALUATE', 'CUSTOM'))
);
--> statement-breakpoint
CREATE TABLE "metric_batches" (
	"run_id" text NOT NULL,
	"batch_id" text NOT NULL,
	"points" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "metric_batches_run_id_batch_id_pk" PRIMARY KEY("run_id","batch_id")
);
--> statement-breakpoint
CREATE TABLE "metric_points" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" text NOT NULL,
	"key" text NOT NULL,
	"step" integer NOT NULL,
	"value" double precision NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	"batch_id" text
);
--> statement-breakpoint
CREATE TABLE "metric_rollups" (
	"run_id" text NOT NULL,
	"key" text NOT NULL,
	"bucket_size" integer NOT NULL,
	"bucket" integer NOT NULL,
	"count" integer NOT NULL,
	"min" double precision NOT NULL,
	"max" double precision NOT NULL,
	"sum" double precision NOT NULL,
	"last" double precision NOT NULL,
	CONSTRAINT "metric_rollups_run_id_key_bucket_size_bucket_pk" PRIMARY KEY("run_id","key","bucket_size","bucket")
);
--> statement-breakpoint
CREATE TABLE "nodes" (
	"id" text PRIMARY KEY NOT NULL,
	"hostname" text NOT NULL,
	"labels" jsonb NOT NULL,
	"status" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_seen_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "projects" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"primary_metric" text,
	"primary_metric_mode" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "projects_name_unique" UNIQUE("name")
);
--> statement-breakpoint
CREATE TABLE "run_log_refs" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" text NOT NULL,
	"node_id" text,
	"uri" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "runs" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text,
	"experiment_id" text,
	"job_id" text,
	"attempt" integer,
	"source" text NOT NULL,
	"name" text,
	"status" text NOT NULL,
	"params" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"ended_at" timestamp with time zone,
	CONSTRAINT "runs_source_known" CHECK ("runs"."source" in ('job', 'sdk', 'import'))
);
--> statement-breakpoint
ALTER TABLE "checkpoints" ADD CONSTRAINT "checkpoints_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD CONSTRAINT "checkpoints_parent_checkpoint_id_checkpoints_id_fk" FOREIGN KEY ("parent_checkpoint_id") REFERENCES "public"."checkpoints"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "evaluations" ADD CONSTRAINT "evaluations_checkpoint_id_checkpoints_id_fk" FOREIGN KEY ("checkpoint_id") REFERENCES "public"."checkpoints"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "evaluations" ADD CONSTRAINT "evaluations_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "experiments" ADD CONSTRAINT "experiments_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "gpu_slots" ADD CONSTRAINT "gpu_slots_node_id_nodes_id_fk" FOREIGN KEY ("node_id") REFERENCES "public"."nodes"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "gpu_slots" ADD CONSTRAINT "gpu_slots_owner_job_id_jobs_id_fk" FOREIGN KEY ("owner_job_id") REFERENCES "public"."jobs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "job_attempts" ADD CONSTRAINT "job_attempts_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "job_transitions" ADD CONSTRAINT "job_transitions_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_experiment_id_experiments_id_fk" FOREIGN KEY ("experiment_id") REFERENCES "public"."experiments"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "metric_batches" ADD CONSTRAINT "metric_batches_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "metric_points" ADD CONSTRAINT "metric_points_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "metric_rollups" ADD CONSTRAINT "metric_rollups_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "run_log_refs" ADD CONSTRAINT "run_log_refs_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_experiment_id_experiments_id_fk" FOREIGN KEY ("experiment_id") REFERENCES "public"."experiments"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "checkpoints_run_fingerprint" ON "checkpoints" USING btree ("run_id","fingerprint");--> statement-breakpoint
CREATE INDEX "events_run" ON "events" USING btree ("run_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "experiments_project_name" ON "experiments" USING btree ("project_id","name");--> statement-breakpoint
CREATE INDEX "gpu_slots_owner" ON "gpu_slots" USING btree ("owner_job_id");--> statement-breakpoint
CREATE INDEX "job_transitions_job" ON "job_transitions" USING btree ("job_id","id");--> statement-breakpoint
CREATE INDEX "jobs_queue_order" ON "jobs" USING btree ("state","priority","queued_at");--> statement-breakpoint
CREATE INDEX "jobs_created" ON "jobs" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "metric_points_run_key_step" ON "metric_points" USING btree ("run_id","key","step");--> statement-breakpoint
CREATE UNIQUE INDEX "runs_job_attempt" ON "runs" USING btree ("job_id","attempt");