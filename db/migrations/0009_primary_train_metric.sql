ALTER TABLE "experiments" ADD COLUMN "primary_train_metric" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "primary_train_metric" text;