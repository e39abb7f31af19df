CREATE TABLE "logged_model_metrics" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"model_id" text NOT NULL,
	"run_id" text,
	"key" text NOT NULL,
	"value" double precision NOT NULL,
	"step" bigint NOT NULL,
	"timestamp_ms" bigint NOT NULL,
	"dataset_name" text,
	"dataset_digest" text
);
--> statement-breakpoint
CREATE TABLE "logged_models" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"experiment_id" text NOT NULL,
	"source_run_id" text,
	"name" text NOT NULL,
	"model_type" text,
	"status" text DEFAULT 'LOGGED_MODEL_PENDING' NOT NULL,
	"status_message" text,
	"tags" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"params" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"deleted_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "mlflow_traces" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"experiment_id" text NOT NULL,
	"client_request_id" text,
	"request_time" timestamp with time zone NOT NULL,
	"execution_ms" bigint,
	"state" text NOT NULL,
	"request_preview" text,
	"response_preview" text,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"tags" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "run_inputs" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" text NOT NULL,
	"kind" text NOT NULL,
	"key" text NOT NULL,
	"dataset" jsonb,
	"tags" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"model_id" text,
	"step" bigint,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "run_inputs_kind_known" CHECK ("run_inputs"."kind" in ('dataset', 'model_input', 'model_output'))
);
--> statement-breakpoint
ALTER TABLE "logged_model_metrics" ADD CONSTRAINT "logged_model_metrics_model_id_logged_models_id_fk" FOREIGN KEY ("model_id") REFERENCES "public"."logged_models"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "logged_models" ADD CONSTRAINT "logged_models_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "logged_models" ADD CONSTRAINT "logged_models_experiment_id_experiments_id_fk" FOREIGN KEY ("experiment_id") REFERENCES "public"."experiments"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "logged_models" ADD CONSTRAINT "logged_models_source_run_id_runs_id_fk" FOREIGN KEY ("source_run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mlflow_traces" ADD CONSTRAINT "mlflow_traces_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "mlflow_traces" ADD CONSTRAINT "mlflow_traces_experiment_id_experiments_id_fk" FOREIGN KEY ("experiment_id") REFERENCES "public"."experiments"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "run_inputs" ADD CONSTRAINT "run_inputs_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "logged_model_metrics_model" ON "logged_model_metrics" USING btree ("model_id","key","id");--> statement-breakpoint
CREATE INDEX "logged_models_experiment" ON "logged_models" USING btree ("experiment_id","created_at");--> statement-breakpoint
CREATE INDEX "logged_models_source_run" ON "logged_models" USING btree ("source_run_id");--> statement-breakpoint
CREATE INDEX "mlflow_traces_experiment_time" ON "mlflow_traces" USING btree ("experiment_id","request_time");--> statement-breakpoint
CREATE UNIQUE INDEX "run_inputs_run_kind_key" ON "run_inputs" USING btree ("run_id","kind","key");