ALTER TABLE "log_chunks" ADD COLUMN "rank" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "run_log_refs" ADD COLUMN "rank" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "log_chunks" DROP CONSTRAINT "log_chunks_job_id_attempt_stream_offset_pk";--> statement-breakpoint
ALTER TABLE "run_log_refs" DROP CONSTRAINT "run_log_refs_job_id_attempt_stream_pk";--> statement-breakpoint
ALTER TABLE "log_chunks" ADD CONSTRAINT "log_chunks_job_id_attempt_rank_stream_offset_pk" PRIMARY KEY("job_id","attempt","rank","stream","offset");--> statement-breakpoint
ALTER TABLE "run_log_refs" ADD CONSTRAINT "run_log_refs_job_id_attempt_rank_stream_pk" PRIMARY KEY("job_id","attempt","rank","stream");