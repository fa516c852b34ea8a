-- Fewer index writes per job (docs/POSTGRES.md "Performance"): every
-- claim and commit moves a row and writes its events, and each index
-- entry written is work for the database and its WAL.

-- Recovery reads the running jobs through jobs_status_id (status =
-- 'in-progress': as many rows as jobs are running, whatever the table's
-- size) and compares their leases there. Without an index on lease_until
-- a heartbeat (last_heartbeat, lease_until) changes no indexed column and
-- can be a HOT update: no new index entry at all.
DROP INDEX jobs_lease;

-- A job's history is read by job_events_job (job_id, seq); seq stays an
-- identity (GENERATED ALWAYS: the order), with no index of its own to
-- write at every event.
ALTER TABLE job_events DROP CONSTRAINT job_events_pkey;

-- Room in each page for the HOT updates above (heartbeats, the
-- handler's record, an operator's request).
ALTER TABLE jobs SET (fillfactor = 90);
