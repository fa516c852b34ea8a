-- The daemons on the database (docs/POSTGRES.md "Agents"): one row per
-- agentd (by agent id) and per host's managerd and watchdogd, written at
-- start, renewed by one UPDATE per heartbeat interval (never per job),
-- stamped stopped_at by a clean exit. heartbeat_at and live_until are on
-- the database's clock: a row is live while live_until has not passed
-- and stopped_at is null.
CREATE TABLE agents (
	kind         text        NOT NULL CHECK (kind IN ('agentd', 'managerd', 'watchdogd')),
	id           text        NOT NULL,
	host         text        NOT NULL,
	pid          integer     NOT NULL,
	version      text        NOT NULL DEFAULT '',
	started_at   timestamptz NOT NULL,
	heartbeat_at timestamptz NOT NULL,
	live_until   timestamptz NOT NULL,
	stopped_at   timestamptz,
	concurrency  integer     NOT NULL DEFAULT 0,
	kinds        text[]      NOT NULL DEFAULT '{}',
	max_attempts integer     NOT NULL DEFAULT 0,
	PRIMARY KEY (kind, id)
) WITH (fillfactor = 50);
