-- The console's change counters (0004_console_changes) on the tables a scheduling pass writes
-- (jobs, job_transitions, gpu_slots) are bumped once per statement, not once per row: a pass that
-- places 800 jobs ran 2,400 row triggers, a tenth of its time in PostgreSQL. What moves a counter
-- is unchanged: a statement that inserts or deletes a row, or updates a row to other values (an
-- UPDATE of no row, or of the same values, still wakes no console). The console only compares a
-- counter with its last reading, so one bump a statement says all it needs.
CREATE OR REPLACE FUNCTION gpuplane_bump_change_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM changed_rows) THEN
    PERFORM nextval(('gpuplane_change_' || TG_ARGV[0])::regclass);
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
-- An update changed something when a row after it is not among the rows before it: the rows keep
-- their primary key (nothing updates one), so that is a row whose values changed.
CREATE OR REPLACE FUNCTION gpuplane_bump_change_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT * FROM new_rows EXCEPT ALL SELECT * FROM old_rows) THEN
    PERFORM nextval(('gpuplane_change_' || TG_ARGV[0])::regclass);
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
DROP TRIGGER IF EXISTS "jobs_change" ON "jobs";--> statement-breakpoint
DROP TRIGGER IF EXISTS "jobs_change_update" ON "jobs";--> statement-breakpoint
DROP TRIGGER IF EXISTS "job_transitions_change" ON "job_transitions";--> statement-breakpoint
DROP TRIGGER IF EXISTS "gpu_slots_change" ON "gpu_slots";--> statement-breakpoint
DROP TRIGGER IF EXISTS "gpu_slots_change_update" ON "gpu_slots";--> statement-breakpoint
CREATE TRIGGER "jobs_change_insert" AFTER INSERT ON "jobs" REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_rows('jobs');--> statement-breakpoint
CREATE TRIGGER "jobs_change_delete" AFTER DELETE ON "jobs" REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_rows('jobs');--> statement-breakpoint
CREATE TRIGGER "jobs_change_update" AFTER UPDATE ON "jobs" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_updated('jobs');--> statement-breakpoint
CREATE TRIGGER "job_transitions_change_insert" AFTER INSERT ON "job_transitions" REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_rows('jobs');--> statement-breakpoint
CREATE TRIGGER "job_transitions_change_delete" AFTER DELETE ON "job_transitions" REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_rows('jobs');--> statement-breakpoint
CREATE TRIGGER "gpu_slots_change_insert" AFTER INSERT ON "gpu_slots" REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_rows('nodes');--> statement-breakpoint
CREATE TRIGGER "gpu_slots_change_delete" AFTER DELETE ON "gpu_slots" REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_rows('nodes');--> statement-breakpoint
CREATE TRIGGER "gpu_slots_change_update" AFTER UPDATE ON "gpu_slots" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_updated('nodes');
