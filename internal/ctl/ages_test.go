package ctl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// setUpdated rewrites id's job.json with updated_at at t, as if the job
// had entered its state then.
func (e *env) setUpdated(id string, at time.Time) { e.setTimes(id, at, nil) }

// setTimes rewrites id's job.json with updated_at and, when not nil,
// started_at.
func (e *env) setTimes(id string, updated time.Time, started *time.Time) {
	e.t.Helper()
	loc := e.where(id)
	j, err := job.ReadJob(loc.Dir)
	if err != nil {
		e.t.Fatal(err)
	}
	j.UpdatedAt = updated.UTC()
	if started != nil {
		s := started.UTC()
		j.StartedAt = &s
	}
	if err := os.WriteFile(filepath.Join(loc.Dir, job.JobFile), j.Marshal(), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// agesCtl is a Ctl whose clock stands at now.
func (e *env) agesCtl(now time.Time) *ctl.Ctl {
	c := e.ctl("")
	c.Now = func() time.Time { return now }
	return c
}

type agesDoc map[string]struct {
	Total      int `json:"total"`
	Unreadable int `json:"unreadable"`
	Buckets    []struct {
		LE    *float64 `json:"le_seconds"`
		Count int      `json:"count"`
	} `json:"buckets"`
}

func (e *env) ages(now time.Time) agesDoc {
	e.t.Helper()
	if err := e.agesCtl(now).StatsAges(true); err != nil {
		e.t.Fatal(err)
	}
	var doc agesDoc
	if err := json.Unmarshal(e.stdout.Bytes(), &doc); err != nil {
		e.t.Fatalf("%v: %s", err, e.stdout)
	}
	return doc
}

// counts returns a state's bucket counts.
func (d agesDoc) counts(state string) []int {
	var out []int
	for _, b := range d[state].Buckets {
		out = append(out, b.Count)
	}
	return out
}

func TestStatsAgesBucketEdges(t *testing.T) {
	e := newEnv(t)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	ages := map[string]time.Duration{
		"future":   -time.Hour,                         // clock skew: first bucket
		"zero":     0,                                  // le 60
		"at1m":     time.Minute,                        // le 60: an edge is inclusive
		"past1m":   time.Minute + time.Millisecond,     // le 300
		"at5m":     5 * time.Minute,                    // le 300
		"at640m":   640 * time.Minute,                  // le 38400
		"past640m": 640*time.Minute + time.Millisecond, // older
		"days":     72 * time.Hour,                     // older
	}
	for id, d := range ages {
		e.submit(id, nil)
		e.setUpdated(id, now.Add(-d))
	}
	doc := e.ages(now)
	if len(doc) != len(job.States) {
		t.Fatalf("%d states, want %d: %v", len(doc), len(job.States), doc)
	}
	want := []int{3, 2, 0, 0, 0, 0, 0, 0, 1, 2}
	if got := doc.counts("queued"); !slices.Equal(got, want) {
		t.Fatalf("queued buckets %v, want %v", got, want)
	}
	if q := doc["queued"]; q.Total != len(ages) || q.Unreadable != 0 {
		t.Fatalf("queued: %+v", q)
	}
	for _, st := range []string{"deferred", "held", "in-progress", "stale", "failed", "succeeded", "killed"} {
		if d := doc[st]; d.Total != 0 || len(d.Buckets) != 10 || !slices.Equal(doc.counts(st), make([]int, 10)) {
			t.Errorf("%s: %+v", st, d)
		}
	}
}

func TestStatsAgesInProgressFromStartedAt(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC()
	e.claim("run")
	// Claimed 30 minutes ago, heartbeat just now (which refreshes updated_at).
	started := now.Add(-30 * time.Minute)
	e.setTimes("run", now, &started)
	e.failed("bad")
	e.setUpdated("bad", now.Add(-3*time.Minute))
	doc := e.ages(now)
	if got, want := doc.counts("in-progress"), []int{0, 0, 0, 0, 1, 0, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("in-progress %v, want %v (by started_at)", got, want)
	}
	if got, want := doc.counts("failed"), []int{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("failed %v, want %v", got, want)
	}
}

func TestStatsAgesUnreadable(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC()
	e.submit("ok", nil)
	writeFile(t, e.s.Path("held", "broken", "job.json"), "{not json")
	if err := os.MkdirAll(e.s.Path("deferred", "empty"), 0o755); err != nil { // no job.json at all
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", e.s.Path("incoming", "evil")); err != nil {
		t.Fatal(err)
	}
	doc := e.ages(now)
	if q := doc["queued"]; q.Total != 2 || q.Unreadable != 1 || doc.counts("queued")[0] != 1 {
		t.Errorf("queued: %+v", q)
	}
	for _, st := range []string{"held", "deferred"} {
		if d := doc[st]; d.Total != 1 || d.Unreadable != 1 || !slices.Equal(doc.counts(st), make([]int, 10)) {
			t.Errorf("%s: %+v", st, d)
		}
	}
	// The table says so too, and the command does not fail.
	if err := e.agesCtl(now).StatsAges(false); err != nil {
		t.Fatal(err)
	}
	ls := lines(e.stdout.String())
	if len(ls) != 1+len(job.States)+1 {
		t.Fatalf("table: %q", ls)
	}
	head := strings.Fields(ls[0])
	wantHead := []string{"STATE", "T", "1m", "5m", "10m", "20m", "40m", "80m", "160m", "320m", "640m", "640m+", "UNREADABLE"}
	if strings.Join(head, " ") != strings.Join(wantHead, " ") {
		t.Fatalf("header %q", head)
	}
	rows := map[string][]string{}
	for _, l := range ls[1:] {
		f := strings.Fields(l)
		if len(f) != len(wantHead) {
			t.Fatalf("row %q", l)
		}
		rows[f[0]] = f[1:]
	}
	if r := rows["held"]; r[0] != "1" || r[len(r)-1] != "1" {
		t.Errorf("held row %q", r)
	}
	if r := rows["TOTAL"]; r[0] != "4" || r[1] != "1" || r[len(r)-1] != "3" {
		t.Errorf("TOTAL row %q", r)
	}
}

func TestStatsAgesJSONSchema(t *testing.T) {
	e := newEnv(t)
	e.submit("a", nil)
	if err := e.agesCtl(time.Now()).StatsAges(true); err != nil {
		t.Fatal(err)
	}
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(e.stdout.Bytes(), &raw); err != nil {
		t.Fatalf("%v: %s", err, e.stdout)
	}
	for _, st := range job.States {
		obj, ok := raw[string(st)]
		if !ok || len(obj) != 3 || obj["total"] == nil || obj["unreadable"] == nil || obj["buckets"] == nil {
			t.Fatalf("%s: %s", st, e.stdout)
		}
		var bs []map[string]any
		if err := json.Unmarshal(obj["buckets"], &bs); err != nil || len(bs) != 10 {
			t.Fatalf("%s buckets: %v %s", st, err, obj["buckets"])
		}
		wantLE := []float64{60, 300, 600, 1200, 2400, 4800, 9600, 19200, 38400}
		for i, b := range bs {
			le, hasLE := b["le_seconds"]
			if _, hasCount := b["count"]; !hasCount || !hasLE || len(b) != 2 {
				t.Fatalf("%s bucket %d: %v", st, i, b)
			}
			if i < len(wantLE) && le != wantLE[i] || i == len(wantLE) && le != nil {
				t.Fatalf("%s bucket %d le_seconds %v", st, i, le)
			}
		}
	}
}
