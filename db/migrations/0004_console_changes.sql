-- Change counters for the console's live updates (db/queries/changes.ts): one sequence per
-- topic, bumped by triggers on the tables behind it. Sequences are not transactional, so a bump
-- holds no lock and never makes one writer wait for another; reading them all is one cheap query.
-- A counter moves before its transaction commits: the watcher repeats each change ~1 s later.
CREATE SEQUENCE IF NOT EXISTS "gpuplane_change_jobs";--> statement-breakpoint
CREATE SEQUENCE IF NOT EXISTS "gpuplane_change_nodes";--> statement-breakpoint
CREATE SEQUENCE IF NOT EXISTS "gpuplane_change_runs";--> statement-breakpoint
CREATE SEQUENCE IF NOT EXISTS "gpuplane_change_metrics";--> statement-breakpoint
CREATE SEQUENCE IF NOT EXISTS "gpuplane_change_events";--> statement-breakpoint
CREATE SEQUENCE IF NOT EXISTS "gpuplane_change_checkpoints";--> statement-breakpoint
CREATE OR REPLACE FUNCTION gpuplane_bump_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM nextval(('gpuplane_change_' || TG_ARGV[0])::regclass);
  RETURN NULL;
END
$$;--> statement-breakpoint
-- Append-mostly, high-volume tables: once per statement.
CREATE TRIGGER "metric_chunks_change" AFTER INSERT OR UPDATE OR DELETE ON "metric_chunks" FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change('metrics');--> statement-breakpoint
CREATE TRIGGER "events_change" AFTER INSERT OR UPDATE OR DELETE ON "events" FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change('events');--> statement-breakpoint
-- The others per row, so that sweeps and heartbeats that change nothing a page shows (an UPDATE
-- of no row, a node's last_seen_at, a run's heartbeat_at, an upsert of the same values) do not
-- wake every console.
CREATE TRIGGER "jobs_change" AFTER INSERT OR DELETE ON "jobs" FOR EACH ROW EXECUTE FUNCTION gpuplane_bump_change('jobs');--> statement-breakpoint
CREATE TRIGGER "jobs_change_update" AFTER UPDATE ON "jobs" FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION gpuplane_bump_change('jobs');--> statement-breakpoint
CREATE TRIGGER "job_transitions_change" AFTER INSERT OR DELETE ON "job_transitions" FOR EACH ROW EXECUTE FUNCTION gpuplane_bump_change('jobs');--> statement-breakpoint
CREATE TRIGGER "nodes_change" AFTER INSERT OR DELETE ON "nodes" FOR EACH ROW EXECUTE FUNCTION gpuplane_bump_change('nodes');--> statement-breakpoint
CREATE TRIGGER "nodes_change_update" AFTER UPDATE ON "nodes" FOR EACH ROW WHEN ((to_jsonb(OLD) - 'last_seen_at') IS DISTINCT FROM (to_jsonb(NEW) - 'last_seen_at')) EXECUTE FUNCTION gpuplane_bump_change('nodes');--> statement-breakpoint
CREATE TRIGGER "gpu_slots_change" AFTER INSERT OR DELETE ON "gpu_slots" FOR EACH ROW EXECUTE FUNCTION gpuplane_bump_change('nodes');--> statement-breakpoint
CREATE TRIGGER "gpu_slots_change_update" AFTER UPDATE ON "gpu_slots" FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION gpuplane_bump_change('nodes');--> statement-breakpoint
CREATE TRIGGER "runs_change" AFTER INSERT OR DELETE ON "runs" FOR EACH ROW EXECUTE FUNCTION gpuplane_bump_change('runs');--> statement-breakpoint
CREATE TRIGGER "runs_change_update" AFTER UPDATE ON "runs" FOR EACH ROW WHEN ((to_jsonb(OLD) - 'heartbeat_at') IS DISTINCT FROM (to_jsonb(NEW) - 'heartbeat_at')) EXECUTE FUNCTION gpuplane_bump_change('runs');--> statement-breakpoint
CREATE TRIGGER "checkpoints_change" AFTER INSERT OR DELETE ON "checkpoints" FOR EACH ROW EXECUTE FUNCTION gpuplane_bump_change('checkpoints');--> statement-breakpoint
CREATE TRIGGER "checkpoints_change_update" AFTER UPDATE ON "checkpoints" FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION gpuplane_bump_change('checkpoints');--> statement-breakpoint
CREATE TRIGGER "evaluations_change" AFTER INSERT OR DELETE ON "evaluations" FOR EACH ROW EXECUTE FUNCTION gpuplane_bump_change('checkpoints');--> statement-breakpoint
CREATE TRIGGER "evaluations_change_update" AFTER UPDATE ON "evaluations" FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION gpuplane_bump_change('checkpoints');
