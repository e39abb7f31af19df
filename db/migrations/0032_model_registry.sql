CREATE TABLE "model_versions" (
	"model_id" text NOT NULL,
	"version" integer NOT NULL,
	"source" text NOT NULL,
	"run_id" text,
	"run_link" text,
	"logged_model_id" text,
	"checkpoint_id" text,
	"evaluation_id" text,
	"justification" jsonb,
	"description" text,
	"stage" text DEFAULT 'None' NOT NULL,
	"tags" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"user_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "model_versions_model_id_version_pk" PRIMARY KEY("model_id","version")
);
--> statement-breakpoint
CREATE TABLE "registered_models" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"tags" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"aliases" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"last_version" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "model_versions" ADD CONSTRAINT "model_versions_checkpoint_id_checkpoints_id_fk" FOREIGN KEY ("checkpoint_id") REFERENCES "public"."checkpoints"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "model_versions" ADD CONSTRAINT "model_versions_evaluation_id_evaluations_id_fk" FOREIGN KEY ("evaluation_id") REFERENCES "public"."evaluations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "model_versions" ADD CONSTRAINT "model_versions_model_id_registered_models_id_fk" FOREIGN KEY ("model_id") REFERENCES "public"."registered_models"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "registered_models" ADD CONSTRAINT "registered_models_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "model_versions_run" ON "model_versions" USING btree ("run_id");--> statement-breakpoint
CREATE INDEX "model_versions_checkpoint" ON "model_versions" USING btree ("checkpoint_id");--> statement-breakpoint
CREATE UNIQUE INDEX "registered_models_project_name" ON "registered_models" USING btree ("project_id","name");