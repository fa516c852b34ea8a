package spoolview

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

func openSpool(t *testing.T) *job.Spool {
	t.Helper()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func submit(t *testing.T, s *job.Spool, id string, mod func(*job.SubmitRequest)) {
	t.Helper()
	req := job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{}`)}
	if mod != nil {
		mod(&req)
	}
	if _, err := s.Submit(req); err != nil {
		t.Fatal(err)
	}
}

// populate builds a spool with every state represented: 5 queued (the
// oldest is "q0"), 1 deferred, 1 held, 2 running on agent w1, 1 stale,
// 1 failed, 3 succeeded, 1 killed, 1 corrupt, plus a lock of a running job.
func populate(t *testing.T, s *job.Spool) map[job.State]int {
	t.Helper()
	for i := range 5 {
		submit(t, s, fmt.Sprintf("q%d", i), nil)
		time.Sleep(2 * time.Millisecond) // distinct created_at
	}
	submit(t, s, "d1", func(r *job.SubmitRequest) { r.NotBefore = time.Now().Add(time.Hour) })
	submit(t, s, "h1", func(r *job.SubmitRequest) { r.Held = true })
	h := job.Holder{Actor: "agentd/w1", Agent: "w1"}
	for _, id := range []string{"r1", "r2", "st", "f1", "s1", "s2", "s3", "k1"} {
		submit(t, s, id, nil)
		c, err := s.Claim(id, h)
		if err != nil {
			t.Fatal(err)
		}
		switch id[0] {
		case 'f':
			err = c.Commit(job.Failed, "boom", nil)
		case 's':
			if id == "st" {
				continue
			}
			err = c.Commit(job.Succeeded, "", nil)
		case 'k':
			err = c.Commit(job.Killed, "cancelled", nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// "st" goes stale: its lock is released as a dead owner's would be.
	if _, err := s.RecoverLock("st", "test", "owner died: test"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.Path(job.CorruptDir, "x.20260101T000000.000000Z"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path(job.CorruptDir, "x.20260101T000000.000000Z.quarantine.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return map[job.State]int{
		job.Queued: 5, job.Deferred: 1, job.Held: 1, job.InProgress: 2, job.Stale: 1,
		job.Failed: 1, job.Succeeded: 3, job.Killed: 1,
	}
}

func check(t *testing.T, snap Snapshot, want map[job.State]int) {
	t.Helper()
	for _, st := range job.States {
		if snap.States[st] != want[st] {
			t.Errorf("%s: %d, want %d", st, snap.States[st], want[st])
		}
	}
}

func TestScanCountsEveryState(t *testing.T) {
	s := openSpool(t)
	want := populate(t, s)
	v := New(s, Config{})
	if err := v.Scan(); err != nil {
		t.Fatal(err)
	}
	snap := v.Snapshot()
	check(t, snap, want)
	if !snap.Ready {
		t.Error("not ready after Scan")
	}
	if snap.Locks != 2 || snap.Corrupt != 1 || snap.Agents["w1"] != 2 || len(snap.Running) != 2 {
		t.Errorf("locks %d corrupt %d agents %v running %v; want 2, 1, w1:2, 2 jobs", snap.Locks, snap.Corrupt, snap.Agents, snap.Running)
	}
	q0, err := job.ReadJob(s.JobDir(job.Queued, "", "q0"))
	if err != nil {
		t.Fatal(err)
	}
	if !snap.OldestQueued.Equal(q0.CreatedAt) {
		t.Errorf("oldest queued %v, want q0's %v", snap.OldestQueued, q0.CreatedAt)
	}
}

// TestEventsAreIdempotent replays events that a listing already counted
// (as happens when events are in flight during a relisting): the counts
// must not move.
func TestEventsAreIdempotent(t *testing.T) {
	s := openSpool(t)
	want := populate(t, s)
	v := New(s, Config{})
	if err := v.Scan(); err != nil {
		t.Fatal(err)
	}
	for _, st := range job.States {
		if st == job.InProgress {
			continue
		}
		es, err := fsq.ScanDir(s.StateDir(st))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range es.Dirs {
			v.apply(fsq.Event{Dir: s.StateDir(st), Name: name, Created: true})
		}
		v.apply(fsq.Event{Dir: s.StateDir(st), Name: "never-there", Removed: true})
	}
	check(t, v.Snapshot(), want)

	// A removal seen twice counts once; the oldest moves to the next job.
	for range 2 {
		v.apply(fsq.Event{Dir: s.StateDir(job.Queued), Name: "q0", Removed: true})
	}
	want[job.Queued]--
	snap := v.Snapshot()
	check(t, snap, want)
	q1, _ := job.ReadJob(s.JobDir(job.Queued, "", "q1"))
	if !snap.OldestQueued.Equal(q1.CreatedAt) {
		t.Errorf("oldest queued %v, want q1's %v", snap.OldestQueued, q1.CreatedAt)
	}
}

// TestRunFollowsTheSpool runs the live view (fsnotify, relistings every
// 200ms) while jobs move, and checks it converges to the spool.
func TestRunFollowsTheSpool(t *testing.T) {
	for _, noNotify := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-notify=%v", noNotify), func(t *testing.T) {
			s := openSpool(t)
			v := New(s, Config{Rescan: 200 * time.Millisecond, Running: 50 * time.Millisecond, NoNotify: noNotify})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- v.Run(ctx) }()
			defer func() { cancel(); <-done }()
			<-v.Ready()
			want := populate(t, s)
			waitFor(t, v, want)
			// Move more: claim and finish two queued jobs.
			for _, id := range []string{"q0", "q1"} {
				c, err := s.Claim(id, job.Holder{Actor: "agentd/w2", Agent: "w2"})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Commit(job.Succeeded, "", nil); err != nil {
					t.Fatal(err)
				}
			}
			want[job.Queued] -= 2
			want[job.Succeeded] += 2
			waitFor(t, v, want)
			if got := v.Snapshot().Arrived[job.Succeeded]; got < 5 {
				t.Errorf("arrived in succeeded: %d, want >= 5", got)
			}
		})
	}
}

func waitFor(t *testing.T, v *View, want map[job.State]int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		snap := v.Snapshot()
		ok := true
		for _, st := range job.States {
			ok = ok && snap.States[st] == want[st]
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			check(t, snap, want)
			t.FailNow()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNameSetCompacts(t *testing.T) {
	var s nameSet
	s.reset([]string{"a", "b", "c"})
	for i := range 10000 {
		s.add(fmt.Sprint("n", i))
	}
	for i := range 5000 {
		s.remove(fmt.Sprint("n", i))
	}
	s.remove("a")
	s.add("b")
	if s.len() != 5002 {
		t.Fatalf("len %d, want 5002", s.len())
	}
	s.compact()
	if s.len() != 5002 || s.has(hashName("a")) || !s.has(hashName("n9999")) || s.has(hashName("n0")) {
		t.Fatalf("after compact: len %d", s.len())
	}
}
