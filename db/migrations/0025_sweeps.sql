CREATE TABLE "sweep_trials" (
	"sweep_id" text NOT NULL,
	"trial" integer NOT NULL,
	"job_id" text NOT NULL,
	"params" jsonb NOT NULL,
	"rung" integer,
	"stopped_reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "sweep_trials_sweep_id_trial_pk" PRIMARY KEY("sweep_id","trial"),
	CONSTRAINT "sweep_trials_job_id_unique" UNIQUE("job_id")
);
--> statement-breakpoint
CREATE TABLE "sweeps" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text,
	"experiment_id" text,
	"spec" jsonb NOT NULL,
	"state" text NOT NULL,
	"reason" text,
	"created_by" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"ended_at" timestamp with time zone,
	CONSTRAINT "sweeps_state_known" CHECK ("sweeps"."state" in ('RUNNING', 'SUCCEEDED', 'CANCELLED'))
);
--> statement-breakpoint
ALTER TABLE "sweep_trials" ADD CONSTRAINT "sweep_trials_sweep_id_sweeps_id_fk" FOREIGN KEY ("sweep_id") REFERENCES "public"."sweeps"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sweep_trials" ADD CONSTRAINT "sweep_trials_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sweeps" ADD CONSTRAINT "sweeps_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sweeps" ADD CONSTRAINT "sweeps_experiment_id_experiments_id_fk" FOREIGN KEY ("experiment_id") REFERENCES "public"."experiments"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "sweeps_created" ON "sweeps" USING btree ("created_at");