package frontier_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

// TestCountersSurviveReplay stops a frontier and leaves the crawl as a
// SIGKILL can: a page's outcome and links lines appended but its domain
// file not yet written (the job is in flight again, its counts not in the
// domain), a retry appended to a queue after the domain file, and
// frontier.json's link counters stale. A new frontier must ingest the
// page once more without counting it twice, not count the retry as a
// discovery, and rebuild frontier.json's counters: all equal to a
// recount and to what they were before.
func TestCountersSurviveReplay(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 4, Levels: 3})
	defer site.Close()
	dir := t.TempDir()
	e := startEnvAt(t, dir, 4)
	c := plainCrawl(site, "replay")
	c.MaxDepth = 1
	c.MaxPagesPerRun = 8
	_ = c.Validate()
	st, _ := crawl.Open(e.spool, "replay")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Paused, 30*time.Second)
	waitIdle(t, st)
	e.stop()
	before := recountEqual(t, st)
	if before.Duplicates == 0 || before.TooDeep == 0 {
		t.Fatalf("the crawl dropped too little to tell: %+v", before)
	}

	// The page with the most links, fetched: as if its ingestion had
	// died before its domain file was written.
	var page crawl.Outcome
	if err := st.ScanOutcomes(func(o *crawl.Outcome) bool {
		if o.Outcome == crawl.OutcomeFetched && o.Links > page.Links {
			page = *o
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	d, err := st.LoadDomain(page.Domain)
	if err != nil {
		t.Fatal(err)
	}
	d.InFlight = append(d.InFlight, crawl.Flight{ID: page.JobID, Kind: crawl.KindFetch, URL: page.URL, Depth: page.Depth, ReleasedAt: page.Time})
	d.PagesCrawled--
	d.PagesNew--
	d.StatusCounts["200"]--
	// A retry of another fetched page appended after the domain file
	// was written (its segment's count does not include it).
	var seg *crawl.Segment
	for _, s := range d.Queue {
		if s.Consumed == s.Count && s.Count > 0 {
			seg = s
		}
	}
	if seg == nil {
		t.Fatal("no consumed segment")
	}
	if _, err := crawl.AppendEntries(filepath.Join(st.QueueDir(d.Domain), seg.File),
		[]crawl.Entry{{URL: page.URL, Depth: seg.Depth, Priority: seg.Priority, Try: 1, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteDomain(d, true); err != nil {
		t.Fatal(err)
	}
	fr, err := st.LoadFrontier()
	if err != nil {
		t.Fatal(err)
	}
	fr.Duplicates, fr.TooDeep, fr.OutOfScope = 9999, 7777, 5555
	if err := st.WriteFrontier(fr); err != nil {
		t.Fatal(err)
	}

	e = startEnvAt(t, dir, 4)
	waitIdle(t, st)
	e.stop()
	after := recountEqual(t, st)
	if after.OutOfScope != before.OutOfScope || after.TooDeep != before.TooDeep || after.Duplicates != before.Duplicates ||
		after.Invalid != before.Invalid || after.Filtered != before.Filtered {
		t.Errorf("link counters changed by the replay: before %+v, after %+v", before, after)
	}
	for name, b := range before.Domains {
		a := after.Domains[name]
		if a == nil || a.Discovered != b.Discovered || a.Crawled != b.Crawled || a.Released != b.Released {
			t.Errorf("domain %s: before %+v, after %+v", name, b, a)
		}
	}
}

// waitIdle waits until no job of the crawl is in flight.
func waitIdle(t *testing.T, st *crawl.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		doms, err := st.Domains()
		n := 0
		for _, d := range doms {
			n += len(d.InFlight)
		}
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still in flight after 10s (%v)", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recountEqual checks that the crawl's counters equal a recount and
// returns them.
func recountEqual(t *testing.T, st *crawl.Store) *crawl.Counts {
	t.Helper()
	stored, err := st.Stored()
	if err != nil {
		t.Fatal(err)
	}
	re, err := crawl.Recount(st)
	if err != nil {
		t.Fatal(err)
	}
	if d := stored.Diff(re); len(d) > 0 {
		t.Errorf("counters differ from a recount:\n%s", strings.Join(d, "\n"))
	}
	return stored
}

// TestKilledWithArtifactRetried: an agent that dies after staging a
// page's artifact leaves a job managerd kills (one attempt per crawl
// job) with the artifact inside. The frontier must try the URL again, as
// for a job killed without one, not end it killed and lose its links;
// and the counters must stay equal to a recount.
func TestKilledWithArtifactRetried(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 4, Levels: 3})
	defer site.Close()
	dir := t.TempDir()
	e := startEnvAt(t, dir, 4)
	c := plainCrawl(site, "lost")
	c.MaxDepth = 1
	c.MaxPagesPerRun = 8
	_ = c.Validate()
	st, _ := crawl.Open(e.spool, "lost")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Paused, 30*time.Second)
	waitIdle(t, st)
	e.stop()

	var page crawl.Outcome
	if err := st.ScanOutcomes(func(o *crawl.Outcome) bool {
		if o.Outcome == crawl.OutcomeFetched && o.Depth == 1 {
			page = *o
			return false
		}
		return true
	}); err != nil || page.JobID == "" {
		t.Fatalf("no fetched page at depth 1 (%v)", err)
	}
	// The job as managerd leaves it when its agent died after staging
	// result.json: killed, the artifact inside.
	from, to := e.spool.JobDir(job.Succeeded, "", page.JobID), e.spool.JobDir(job.Killed, "", page.JobID)
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
	j, err := job.ReadJob(to)
	if err != nil {
		t.Fatal(err)
	}
	j.Status, j.Reason = job.Killed, "crashed and exceeded max retries (1)"
	if err := os.WriteFile(filepath.Join(to, job.JobFile), j.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	// And the frontier as it was before it ingested the job.
	for _, name := range []string{crawl.OutcomesFile, crawl.LinksFile} {
		b, err := os.ReadFile(st.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		var keep []string
		for _, l := range strings.SplitAfter(string(b), "\n") {
			if !strings.Contains(l, `"job_id":"`+page.JobID+`"`) {
				keep = append(keep, l)
			}
		}
		if err := os.WriteFile(st.Path(name), []byte(strings.Join(keep, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := st.LoadDomain(page.Domain)
	if err != nil {
		t.Fatal(err)
	}
	d.InFlight = append(d.InFlight, crawl.Flight{ID: page.JobID, Kind: crawl.KindFetch, URL: page.URL, Depth: page.Depth, ReleasedAt: page.Time})
	d.PagesCrawled--
	d.PagesNew--
	d.StatusCounts["200"]--
	if err := st.WriteDomain(d, true); err != nil {
		t.Fatal(err)
	}

	e = startEnvAt(t, dir, 4)
	if _, err := st.Update(func(c *crawl.Crawl) error { c.State, c.Run, c.MaxPagesPerRun = crawl.Running, c.Run+1, 0; return nil }); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	e.stop()
	retried := false
	_ = st.ScanOutcomes(func(o *crawl.Outcome) bool {
		if o.Outcome == crawl.OutcomeKilled {
			t.Errorf("%s ended killed (%s): it should have been tried again", o.URL, o.Detail)
		}
		if o.JobID == crawl.RetryJobID("lost", page.URL, 0, 1) && o.Outcome == crawl.OutcomeFetched {
			retried = true
		}
		return true
	})
	if !retried {
		t.Errorf("%s: no fetched outcome of its retry", page.URL)
	}
	u, _ := url.Parse(page.URL)
	n := 0
	for _, r := range site.Log() {
		if r.Host == u.Hostname() && r.URI == u.RequestURI() {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%s requested %d times, want 2 (its lost attempt and the retry)", page.URL, n)
	}
	recountEqual(t, st)
}

// TestRequeuedCopyNotIngestedTwice: a release refused because its job's
// lock was held puts a copy of the URL's entry back in the queue; a
// crash before the domain file recorded the undo leaves the original
// released (its job ran and was ingested) and the copy queued. Releasing
// the copy finds the job (a duplicate ID): the frontier must not take it
// for a release lost in a crash and ingest (count) the page again.
func TestRequeuedCopyNotIngestedTwice(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 4, Levels: 3})
	defer site.Close()
	dir, st, page, d := pausedWithPage(t, site, "copy")
	seg := d.Segment(page.Depth, 0)
	if _, err := crawl.AppendEntries(filepath.Join(st.QueueDir(d.Domain), seg.File),
		[]crawl.Entry{{URL: page.URL, Depth: page.Depth, At: time.Now(), Requeued: true}}); err != nil {
		t.Fatal(err)
	}
	e := startEnvAt(t, dir, 4)
	if _, err := st.Update(func(c *crawl.Crawl) error { c.State, c.Run, c.MaxPagesPerRun = crawl.Running, c.Run+1, 0; return nil }); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	e.stop()
	recountEqual(t, st)
	u, _ := url.Parse(page.URL)
	for k, n := range testsite.Counts(site.Log()) {
		if n > 1 {
			t.Errorf("%s requested %d times", k, n)
		}
	}
	lines := 0
	_ = st.ScanOutcomes(func(o *crawl.Outcome) bool {
		if o.JobID == page.JobID {
			lines++
		}
		return true
	})
	if lines != 1 {
		t.Errorf("%s (%s): %d outcome lines, want 1: ingested again", page.URL, u.Path, lines)
	}
}

// TestRetryQueuedTwiceNotIngestedTwice: an ingest that queues a URL's
// retry, cut by a crash before its domain file is written, queues the
// same retry again when the job is ingested again after the restart: the
// queue holds two entries of one retry job. The first release makes the
// job, which runs and is ingested; the second finds it (a duplicate ID)
// finished, and must not ingest (count) its page a second time.
func TestRetryQueuedTwiceNotIngestedTwice(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 4, Levels: 3})
	defer site.Close()
	dir, st, page, d := pausedWithPage(t, site, "twice")
	seg := d.Segment(page.Depth, 0)
	retry := crawl.Entry{URL: page.URL, Depth: page.Depth, At: time.Now(), Round: d.Round, Try: 1, Failures: 1}
	if _, err := crawl.AppendEntries(filepath.Join(st.QueueDir(d.Domain), seg.File), []crawl.Entry{retry, retry}); err != nil {
		t.Fatal(err)
	}
	e := startEnvAt(t, dir, 4)
	// A long interval: the second entry is released after the first's
	// job was ingested, not while it is in flight.
	if _, err := st.Update(func(c *crawl.Crawl) error {
		c.State, c.Run, c.MaxPagesPerRun, c.Delay = crawl.Running, c.Run+1, 0, crawl.Duration(400*time.Millisecond)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 60*time.Second)
	e.stop()
	recountEqual(t, st)
	u, _ := url.Parse(page.URL)
	if n := testsite.Counts(site.Log())[u.Hostname()+u.RequestURI()]; n != 2 {
		t.Errorf("%s requested %d times, want 2 (its first try and one retry)", page.URL, n)
	}
	retryID := crawl.RetryJobID("twice", page.URL, d.Round, 1)
	lines := 0
	_ = st.ScanOutcomes(func(o *crawl.Outcome) bool {
		if o.JobID == retryID {
			lines++
		}
		return true
	})
	if lines != 1 {
		t.Errorf("retry job %s: %d outcome lines, want 1: ingested again", retryID, lines)
	}
}

// pausedWithPage crawls site as crawl name until its first run's budget
// pauses it, stops the daemons, and returns the spool's directory, the
// crawl, a page fetched at depth 1 and its domain: the state a test then
// edits as a crash could have left it, before starting again in dir.
func pausedWithPage(t *testing.T, site *testsite.Site, name string) (string, *crawl.Store, crawl.Outcome, *crawl.Domain) {
	t.Helper()
	dir := t.TempDir()
	e := startEnvAt(t, dir, 4)
	c := plainCrawl(site, name)
	c.MaxDepth = 1
	c.MaxPagesPerRun = 8
	_ = c.Validate()
	st, _ := crawl.Open(e.spool, name)
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Paused, 30*time.Second)
	waitIdle(t, st)
	e.stop()
	var page crawl.Outcome
	_ = st.ScanOutcomes(func(o *crawl.Outcome) bool {
		if o.Outcome == crawl.OutcomeFetched && o.Depth == 1 {
			page = *o
			return false
		}
		return true
	})
	if page.JobID == "" {
		t.Fatal("no fetched page at depth 1")
	}
	d, err := st.LoadDomain(page.Domain)
	if err != nil {
		t.Fatal(err)
	}
	return dir, st, page, d
}
