-- farro's job queue: the fields of job.json, one row per job.
CREATE TABLE jobs (
	id             text PRIMARY KEY,
	schema_version text        NOT NULL,
	kind           text        NOT NULL,
	status         text        NOT NULL,
	priority       integer     NOT NULL DEFAULT 0,
	attempts       integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
	max_attempts   integer     NOT NULL DEFAULT 0 CHECK (max_attempts >= 0),
	created_at     timestamptz NOT NULL,
	updated_at     timestamptz NOT NULL,
	not_before     timestamptz,
	agent          text        NOT NULL DEFAULT '',
	correlation_id text        NOT NULL DEFAULT '',
	-- The fencing token of the current (or last) attempt's claim. Every
	-- write of a claim is conditional on it and on status 'in-progress'.
	claim_token    text        NOT NULL DEFAULT '',
	started_at     timestamptz,
	last_heartbeat timestamptz,
	-- The claim's lease, on the database's clock: recovery takes the job
	-- away only once it (plus a grace) has passed.
	lease_until    timestamptz,
	finished_at    timestamptz,
	exit_code      integer,
	reason         text        NOT NULL DEFAULT '',
	error          text        NOT NULL DEFAULT '',
	output_dropped bigint      NOT NULL DEFAULT 0,
	-- prompt.json as submitted, byte for byte (jsonb would reorder keys
	-- and drop duplicates; the prompt is immutable input).
	prompt         bytea       NOT NULL,
	-- The claim order's age: the time a job.NewID id carries
	-- (job.IDTime), or created_at for an id that carries none (one an
	-- operator chose). Written once, at submit.
	age_key        timestamptz NOT NULL,
	-- An operator's request (job.Control) travelling with the job.
	control        jsonb,
	-- The process running the attempt's handler (proc.Identity).
	handler        jsonb
);

-- Claim order: queued jobs by priority, then age (age_key: the time in
-- the id, or created_at), then id. Partial, so that its size is the
-- queue's, not the table's: finished jobs kept for retention never slow a
-- claim, and a claim reads the first entries of this index and stops
-- (LIMIT with FOR UPDATE SKIP LOCKED).
CREATE INDEX jobs_claim_order ON jobs (priority DESC, age_key, id) WHERE status = 'queued';

-- Recovery: the in-progress jobs whose lease has run out. Partial, so a
-- recovery pass reads only the running jobs, oldest lease first.
CREATE INDEX jobs_lease ON jobs (lease_until) WHERE status = 'in-progress';

-- managerd's scans by state (stale and failed to retry, deferred that are
-- due, terminal ones past retention) and farroctl ls by state.
CREATE INDEX jobs_status_id ON jobs (status, id);

-- Each job's transitions, oldest first (events.jsonl of a spool job).
CREATE TABLE job_events (
	seq            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	job_id         text        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	time           timestamptz NOT NULL,
	actor          text        NOT NULL,
	from_state     text        NOT NULL DEFAULT '',
	to_state       text        NOT NULL,
	attempt        integer     NOT NULL DEFAULT 0,
	reason         text        NOT NULL DEFAULT '',
	correlation_id text        NOT NULL DEFAULT ''
);
-- History of one job, in order.
CREATE INDEX job_events_job ON job_events (job_id, seq);

-- The legal-transitions map (pkg/job's), one row per legal pair. A test
-- of pkg/store/pgstore checks that it equals job.Transitions(): a change
-- of the map needs a migration that changes this table.
CREATE TABLE farro_transitions (
	from_state text NOT NULL,
	to_state   text NOT NULL,
	PRIMARY KEY (from_state, to_state)
);
INSERT INTO farro_transitions (from_state, to_state) VALUES
	('queued', 'in-progress'), ('queued', 'held'), ('queued', 'killed'),
	('in-progress', 'succeeded'), ('in-progress', 'failed'), ('in-progress', 'stale'),
	('in-progress', 'held'), ('in-progress', 'killed'), ('in-progress', 'queued'),
	('failed', 'queued'), ('failed', 'deferred'), ('failed', 'killed'),
	('stale', 'queued'), ('stale', 'deferred'), ('stale', 'killed'),
	('deferred', 'queued'), ('deferred', 'held'), ('deferred', 'killed'),
	('held', 'queued'), ('held', 'killed');

-- Only known states, whoever writes the row.
ALTER TABLE jobs ADD CONSTRAINT jobs_status_known CHECK (status IN
	('queued', 'deferred', 'held', 'in-progress', 'stale', 'failed', 'succeeded', 'killed'));

-- The map enforced by the database: an UPDATE that changes status to a
-- pair not in farro_transitions fails, whoever wrote it (farro or an
-- operator's hand-written SQL). The one exception is an operator's retry
-- (killed or succeeded -> queued), allowed only in a transaction that
-- set farro.retry to 'on' with SET LOCAL (pgstore's Retry does).
CREATE FUNCTION farro_check_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.status = OLD.status THEN
		RETURN NEW;
	END IF;
	IF EXISTS (SELECT 1 FROM farro_transitions WHERE from_state = OLD.status AND to_state = NEW.status) THEN
		RETURN NEW;
	END IF;
	IF OLD.status IN ('killed', 'succeeded') AND NEW.status = 'queued'
			AND coalesce(current_setting('farro.retry', true), '') = 'on' THEN
		RETURN NEW;
	END IF;
	RAISE EXCEPTION 'farro: illegal transition % -> % (job %)', OLD.status, NEW.status, OLD.id
		USING ERRCODE = 'FR001';
END;
$$;

CREATE TRIGGER jobs_transition BEFORE UPDATE OF status ON jobs
	FOR EACH ROW EXECUTE FUNCTION farro_check_transition();
