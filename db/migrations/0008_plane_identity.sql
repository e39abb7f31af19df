CREATE TABLE "plane_identity" (
	"only" boolean PRIMARY KEY DEFAULT true NOT NULL,
	"plane_id" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "plane_identity_one_row" CHECK ("plane_identity"."only")
);
