ALTER TABLE "projects" ADD COLUMN "job_uid" bigint;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "job_gid" bigint;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "job_user" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "job_user_source" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "job_uid_slot" integer;--> statement-breakpoint
CREATE UNIQUE INDEX "projects_pool_uid" ON "projects" USING btree ("job_uid") WHERE "projects"."job_user_source" = 'pool';--> statement-breakpoint
ALTER TABLE "projects" ADD CONSTRAINT "projects_job_identity" CHECK (("projects"."job_uid" is null) = ("projects"."job_user_source" is null) and ("projects"."job_uid" is null) = ("projects"."job_gid" is null) and ("projects"."job_uid" is null or "projects"."job_uid" >= 1));