-- The claim statement's test for a paused kind, as a function the planner
-- cannot see into. Written as an anti-join on paused_kinds, the planner
-- estimates from the two tables' statistics how many queued jobs the join
-- leaves; with one kind in the queue (or a never-analyzed paused_kinds)
-- that estimate is "none", so it plans to scan and sort the whole jobs
-- table for every claim (seconds at a million queued jobs) instead of
-- reading the claim index up to its LIMIT. An opaque function gets the
-- planner's default selectivity, and its cost makes a plan that calls it
-- on every row the expensive one: the claim reads the index, and the
-- function runs for the few jobs read (one primary-key lookup each).
CREATE FUNCTION farro_kind_paused(k text) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE COST 1000 AS $$
BEGIN
	RETURN EXISTS (SELECT 1 FROM paused_kinds WHERE kind = k);
END
$$;
