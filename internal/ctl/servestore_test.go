package ctl_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// The dashboard's readings (dashview) give on PostgreSQL what they give
// on a spool holding the same jobs: the job list with every filter, order
// and page, the counts, the age shape's kinds.
func TestDashviewOnStoreMatchesSpool(t *testing.T) {
	t.Parallel()
	backends := []*backend{spoolBackend(t), pgBackend(t)}
	for _, b := range backends {
		b.setUp(t)
		ctx := storeCtx(t)
		for _, r := range []job.SubmitRequest{
			{ID: "jobkkk1", Kind: "noop", Prompt: []byte(`{}`), Actor: "test"},
			{ID: "jobhhh2", Kind: "noop", Held: true, Prompt: []byte(`{}`), Actor: "test"},
			{ID: "jobjjj1", Kind: "exec", Prompt: []byte(`{}`), Actor: "test"},
		} {
			if _, errs := b.st.Submit(ctx, []job.SubmitRequest{r}); errs[0] != nil {
				t.Fatalf("%s: submit %s: %v", b.name, r.ID, errs[0])
			}
		}
	}
	later := time.Now().Add(2 * time.Hour)
	queries := []ctl.JobQuery{
		{Newest: true, Limit: 3},
		{Newest: true, Limit: 3, Offset: 3},
		{Newest: true, Limit: 3, Offset: 6},
		{Limit: 4},
		{States: []job.State{job.Queued}, Newest: true},
		{States: []job.State{job.InProgress, job.Failed}, Limit: 2},
		{Kind: "exec", Newest: true, Limit: 2},
		{Kind: "exec", Newest: true, Limit: 2, Offset: 2},
		{Kind: "noop"},
		{Text: "EXIT STATUS", Newest: true},
		{Text: "kkk"},
		{MinAge: time.Hour},
		{MinAge: time.Hour, Now: later, Kind: "exec", Limit: 3},
		{States: []job.State{job.Held}, MinAge: time.Hour, Now: later},
	}
	type summary struct {
		IDs, Rows            string
		Listed, Matched      int
		Exact, More          bool
		States, Total, Kinds string
	}
	got := map[string][]summary{}
	for _, b := range backends {
		c, _, _ := b.ctl("")
		for _, q := range queries {
			p, err := c.JobsPage(q)
			if err != nil {
				t.Fatalf("%s: JobsPage(%+v): %v", b.name, q, err)
			}
			var s summary
			for _, r := range p.Rows {
				s.IDs += r.ID + " "
				s.Rows += fmt.Sprintf("%s %s %s %d/%d %s %q %q %v; ", r.ID, r.Location, r.Kind, r.Attempts, r.MaxAttempts, r.Agent, r.Reason, r.Error, r.KindPaused)
			}
			s.Listed, s.Matched, s.Exact, s.More = p.Listed, p.Matched, p.Exact, p.More
			got[b.name] = append(got[b.name], s)
		}
		st, err := c.StatsOf()
		if err != nil {
			t.Fatalf("%s: StatsOf: %v", b.name, err)
		}
		sh, err := c.ShapeOf()
		if err != nil {
			t.Fatalf("%s: ShapeOf: %v", b.name, err)
		}
		counts := ""
		for _, s := range job.States {
			counts += fmt.Sprintf("%s %d, ", s, st.States[s])
		}
		got[b.name] = append(got[b.name], summary{States: counts, Total: fmt.Sprint(st.Total, st.OldestQueuedID), Kinds: fmt.Sprint(sh.Kinds)})
	}
	spool, pg := got["spool"], got["postgres"]
	for i := range spool {
		what := "stats and shape"
		if i < len(queries) {
			what = fmt.Sprintf("JobsPage(%+v)", queries[i])
		}
		if spool[i] != pg[i] {
			t.Errorf("%s:\n spool    %+v\n postgres %+v", what, spool[i], pg[i])
		}
	}
	// Not vacuous: the pages hold what the jobs make them hold.
	for i, want := range map[int]string{0: "jobkkk1 jobjjj1 jobiii1 ", 6: "jobjjj1 jobiii1 ", 9: "jobggg1 jobfff1 ", 12: "jobeee1 jobfff1 jobggg1 "} {
		if pg[i].IDs != want {
			t.Errorf("JobsPage(%+v) on postgres: %q, want %q", queries[i], pg[i].IDs, want)
		}
	}
	if !pg[0].More || !pg[0].Exact || pg[0].Matched != 7 || pg[11].IDs != "" {
		t.Errorf("first page %+v, age filter now %+v", pg[0], pg[11])
	}
}

// On PostgreSQL the crawls and a job's output are ErrSpoolOnly errors
// that say where to look; the event tail needs the server's pool, and
// reads the transitions of the last hour through it.
func TestDashviewOnStoreSpoolOnlyAndTail(t *testing.T) {
	t.Parallel()
	b := pgBackend(t)
	b.setUp(t)
	c, _, _ := b.ctl("")
	if _, _, err := c.CrawlsOf(); !errors.Is(err, ctl.ErrSpoolOnly) {
		t.Errorf("CrawlsOf: %v", err)
	}
	if _, _, err := c.CrawlOf("c1"); !errors.Is(err, ctl.ErrSpoolOnly) {
		t.Errorf("CrawlOf: %v", err)
	}
	if _, err := c.WhyOf("c1", "http://a.test/"); !errors.Is(err, ctl.ErrSpoolOnly) {
		t.Errorf("WhyOf: %v", err)
	}
	_, err := c.OutputOf("jobfff1", 100)
	if !errors.Is(err, ctl.ErrSpoolOnly) || !containsAll(err.Error(), "agent t1", "scratch/AGENT/jobfff1/stdout.N.log") {
		t.Errorf("OutputOf: %v", err)
	}
	if _, err := c.OutputOf("nosuch1", 100); !errors.Is(err, job.ErrNotFound) {
		t.Errorf("OutputOf of a missing job: %v", err)
	}
	if _, err := c.TailEvents(time.Hour); err == nil {
		t.Error("TailEvents without a pool: no error")
	}
	pooled, closePool, err := c.OpenStorePool(2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()
	tail, err := pooled.TailEvents(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lines, bad, err := tail.NextFor(pooled.WithContext(storeCtx(t)))
	if err != nil || bad != 0 {
		t.Fatalf("NextFor: %v, %d bad", err, bad)
	}
	to := map[string]string{}
	for _, l := range lines {
		to[l.JobID] = l.Event.To
	}
	if to["jobfff1"] != "succeeded" || to["jobggg1"] != "failed" || to["jobeee1"] != "in-progress" {
		t.Errorf("tail: %v", to)
	}
	if lines, _, err := tail.Next(); err != nil || len(lines) != 0 {
		t.Errorf("second read: %d lines, %v", len(lines), err)
	}
	if _, _, err := (&ctl.Ctl{Store: "postgres://nobody@127.0.0.1:1/none?connect_timeout=5"}).OpenStorePool(0, 0); err == nil ||
		!containsAll(err.Error(), "127.0.0.1:1/none: ") {
		t.Errorf("OpenStorePool of an unreachable database: %v", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
