CREATE TABLE "project_quotas" (
	"project_id" text NOT NULL,
	"pool" text DEFAULT '' NOT NULL,
	"gpus" integer NOT NULL,
	"set_by" text NOT NULL,
	"set_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "project_quotas_project_id_pool_pk" PRIMARY KEY("project_id","pool"),
	CONSTRAINT "project_quotas_gpus_nonnegative" CHECK ("project_quotas"."gpus" >= 0)
);
--> statement-breakpoint
ALTER TABLE "project_quotas" ADD CONSTRAINT "project_quotas_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE no action ON UPDATE no action;