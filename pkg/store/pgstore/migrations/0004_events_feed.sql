-- farroctl events on a database (docs/POSTGRES.md "The event stream")
-- reads job_events by seq from a floor a little behind the newest rows,
-- and by time for --since. A BRIN index is a few pages for the whole
-- table and an insert at the end of the table writes no entry to it
-- (the newest pages are read whole until they are summarised), so the
-- claim's and the commit's inserts keep their cost.
CREATE INDEX job_events_feed ON job_events USING brin (seq, time) WITH (autosummarize = on);
