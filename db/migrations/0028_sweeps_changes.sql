-- The console's change counter for sweeps (db/queries/changes.ts): a sweep's own row (created,
-- ended, cancelled) and its trials' rows (started, stopped at a rung) bump it, once per statement
-- that inserts or deletes a row or changes one's values, as on the tables of 0023. The sweep pages
-- follow it instead of polling.
CREATE SEQUENCE IF NOT EXISTS "gpuplane_change_sweeps";--> statement-breakpoint
CREATE TRIGGER "sweeps_change_insert" AFTER INSERT ON "sweeps" REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_rows('sweeps');--> statement-breakpoint
CREATE TRIGGER "sweeps_change_delete" AFTER DELETE ON "sweeps" REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_rows('sweeps');--> statement-breakpoint
CREATE TRIGGER "sweeps_change_update" AFTER UPDATE ON "sweeps" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_updated('sweeps');--> statement-breakpoint
CREATE TRIGGER "sweep_trials_change_insert" AFTER INSERT ON "sweep_trials" REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_rows('sweeps');--> statement-breakpoint
CREATE TRIGGER "sweep_trials_change_delete" AFTER DELETE ON "sweep_trials" REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_rows('sweeps');--> statement-breakpoint
CREATE TRIGGER "sweep_trials_change_update" AFTER UPDATE ON "sweep_trials" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION gpuplane_bump_change_updated('sweeps');
