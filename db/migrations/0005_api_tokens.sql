CREATE TABLE "api_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"token_hash" text NOT NULL,
	"role" text NOT NULL,
	"projects" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"node_id" text,
	"run_key" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "api_tokens_token_hash_unique" UNIQUE("token_hash"),
	CONSTRAINT "api_tokens_role_known" CHECK ("api_tokens"."role" in ('admin', 'member', 'viewer', 'node')),
	CONSTRAINT "api_tokens_node_role" CHECK (("api_tokens"."role" = 'node') = ("api_tokens"."node_id" is not null))
);
--> statement-breakpoint
CREATE INDEX "api_tokens_node" ON "api_tokens" USING btree ("node_id");