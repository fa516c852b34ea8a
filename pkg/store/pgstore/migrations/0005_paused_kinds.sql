-- Queue-wide pauses of a kind (farroctl pause KIND): the claim statement
-- takes no queued job of a kind listed here (an anti-join on this small
-- table's key, inside the one statement: no round trip added). Running
-- jobs finish; resume deletes the row.
CREATE TABLE paused_kinds (
	kind      text        PRIMARY KEY,
	paused_at timestamptz NOT NULL DEFAULT now(),
	paused_by text        NOT NULL DEFAULT '',
	os_user   text        NOT NULL DEFAULT '',
	host      text        NOT NULL DEFAULT '',
	pid       integer     NOT NULL DEFAULT 0,
	reason    text        NOT NULL DEFAULT ''
);
