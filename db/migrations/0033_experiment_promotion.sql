ALTER TABLE "experiments" ADD COLUMN "promote_model" text;--> statement-breakpoint
ALTER TABLE "experiments" ADD COLUMN "promote_alias" text;--> statement-breakpoint
ALTER TABLE "experiments" ADD CONSTRAINT "experiments_promote_pair" CHECK (("experiments"."promote_model" is null) = ("experiments"."promote_alias" is null));