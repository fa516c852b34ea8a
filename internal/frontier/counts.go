package frontier

import (
	"github.com/farro-dev/farro/internal/crawl"
)

// Exact counters (docs/CRAWL.md, "Counters"). The dropped-link counters
// of frontier.json are not counted as they happen but derived from
// links.jsonl, where every ingested job that found links leaves one line
// with its links' fate, appended with the job's outcome and before the
// domain file that takes the job out of flight. A frontier killed after
// that line and before the domain file ingests the job again and writes
// the same line again: the last line of a job counts, once. Duplicates
// are accepted links minus URLs queued (the domains' pages_discovered,
// exact with their queue segments), so a link queued just before a kill
// and seen again on the replay is not a duplicate twice.

// beginTally starts the line of job id (a fetch or robots job, or the
// seeds): discover counts into d.tally until endTally.
func (d *driver) beginTally(id string) {
	d.tally = crawl.LinkTally{JobID: id}
}

// endTally adds the job's line to the counters, in place of a line the
// job left before a crash, and queues it for links.jsonl.
func (d *driver) endTally() {
	t := d.tally
	d.tally = crawl.LinkTally{}
	if t.JobID == "" {
		return
	}
	old, replay := d.tallied[t.JobID]
	if replay {
		d.linkSums.Add(&old, -1)
		delete(d.tallied, t.JobID)
	}
	if t.Empty() && !replay {
		return
	}
	d.linkSums.Add(&t, 1)
	d.tallies = append(d.tallies, t)
	d.syncLinkCounters()
}

// syncLinkCounters sets frontier.json's link counters from the sums.
func (d *driver) syncLinkCounters() {
	s := &d.linkSums
	d.fr.Invalid, d.fr.OutOfScope, d.fr.Filtered, d.fr.TooDeep, d.fr.TooManyHop = s.Invalid, s.OutOfScope, s.Filtered, s.TooDeep, s.TooManyHop
	d.fr.Duplicates = s.Accepted - d.discovered
	d.frDirty = true
}

// loadCounts rebuilds the link counters when the frontier starts: from
// links.jsonl (the last line of each job), and the domains'
// pages_discovered as load repaired them from the queues (discovered,
// their sum).
func (d *driver) loadCounts(discovered int64) error {
	d.discovered = discovered
	d.tallied = map[string]crawl.LinkTally{}
	if d.fr.Seeded && !d.fr.Tallied {
		// Seeded before links.jsonl existed: start from the counters as
		// they were written (Accepted such that Duplicates stays).
		d.linkSums = crawl.LinkTally{Invalid: d.fr.Invalid, OutOfScope: d.fr.OutOfScope, Filtered: d.fr.Filtered,
			TooDeep: d.fr.TooDeep, TooManyHop: d.fr.TooManyHop, Accepted: d.fr.Duplicates + d.discovered}
		return nil
	}
	lines, err := d.st.ScanLinkTallies()
	if err != nil {
		return err
	}
	d.linkSums = crawl.SumLinkTallies(lines)
	for id, t := range lines {
		if _, ok := d.inflight[id]; ok || id == crawl.SeedsTallyID {
			d.tallied[id] = t
		}
	}
	if d.fr.Seeded {
		d.syncLinkCounters()
	}
	return nil
}

// flushTallies appends the lines of the jobs ingested to links.jsonl
// (fsync), before the outcomes and the domain files.
func (d *driver) flushTallies() error {
	if len(d.tallies) == 0 {
		return nil
	}
	if err := appendJSONLines(d.st.Path(crawl.LinksFile), d.tallies); err != nil {
		return err
	}
	d.tallies = d.tallies[:0]
	return nil
}
