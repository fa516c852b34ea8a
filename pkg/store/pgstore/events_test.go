package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// A transaction that drew a smaller seq but commits after a larger one
// was read: the feed returns its event once, after it commits.
func TestFeedEventOfALateCommitIsNotMissed(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	ctx := ctxT(t)
	submit(t, s, job.SubmitRequest{ID: "j1"})
	fd := s.Follow(FeedFilter{})
	first, err := fd.Next(ctx)
	if err != nil || len(first) != 1 || first[0].JobID != "j1" || first[0].To != job.Queued || first[0].Kind != "noop" {
		t.Fatalf("first Next: %+v, %v", first, err)
	}
	late := sqlConn(t, url)
	tx, err := late.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `INSERT INTO job_events (job_id, time, actor, to_state, reason) VALUES ('j1', now(), 'late', 'queued', 'drawn first')`); err != nil {
		t.Fatal(err)
	}
	submit(t, s, job.SubmitRequest{ID: "j2"}) // a larger seq, committed first
	mid, err := fd.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(mid) != 1 || mid[0].JobID != "j2" {
		t.Fatalf("Next while an older transaction runs: %+v, want j2's event", mid)
	}
	if again, err := fd.Next(ctx); err != nil || len(again) != 0 {
		t.Fatalf("Next again while the older transaction runs: %+v, %v (j2's again?)", again, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var last []FeedEvent
	deadline := time.Now().Add(10 * time.Second) // other tests' transactions may hold the horizon
	for len(last) == 0 && time.Now().Before(deadline) {
		evs, err := fd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last = append(last, evs...)
	}
	if len(last) != 1 || last[0].Actor != "late" || last[0].Seq > mid[0].Seq {
		t.Fatalf("Next after the late commit: %+v, want the late event (drawn before j2's) once", last)
	}
	for range 3 {
		if again, err := fd.Next(ctx); err != nil || len(again) != 0 {
			t.Fatalf("Next with nothing new: %+v, %v", again, err)
		}
	}
}

// Many writers move jobs while the feed is read: every event of
// job_events comes out exactly once.
func TestFeedUnderConcurrentMovesExactlyOnce(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := ctxT(t)
	fd := s.Follow(FeedFilter{})
	seen := map[int64]int{}
	var mu sync.Mutex
	read := func() {
		evs, err := fd.Next(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		for _, e := range evs {
			seen[e.Seq]++
		}
		mu.Unlock()
	}
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
				read()
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := job.Holder{Actor: "agentd/a", Agent: fmt.Sprintf("a%d", w)}
			for i := range 15 {
				id := fmt.Sprintf("w%d-%02d", w, i)
				if _, errs := s.Submit(ctx, []job.SubmitRequest{{ID: id, Kind: "noop", Prompt: []byte(`{}`), Actor: "t"}}); errs[0] != nil {
					t.Error(errs[0])
					return
				}
				cs, err := s.Claim(ctx, h, store.ClaimOptions{Max: 2, Lease: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				for _, c := range cs {
					if err := c.Commit(ctx, job.Succeeded, "", nil); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-readerDone
	var all []int64
	rows, err := s.pool.Query(ctx, `SELECT seq FROM job_events`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var q int64
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		all = append(all, q)
	}
	// What committed after the reader's last pass comes out once every
	// transaction of the server older than it has ended (other tests'
	// included: the horizon is the server's).
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < len(all) && time.Now().Before(deadline) {
		read()
		time.Sleep(10 * time.Millisecond)
	}
	if len(all) < 6*15*2 {
		t.Fatalf("only %d events written", len(all))
	}
	for _, q := range all {
		if seen[q] != 1 {
			t.Errorf("event seq %d read %d times", q, seen[q])
		}
	}
	if len(seen) != len(all) {
		t.Errorf("%d events read, %d written", len(seen), len(all))
	}
}

func TestEventsFilter(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := ctxT(t)
	submit(t, s, job.SubmitRequest{ID: "a1"}, job.SubmitRequest{ID: "b1"})
	claimOne(t, s, "x", time.Minute)
	evs, err := s.Events(ctx, FeedFilter{Job: "a1"})
	if err != nil || len(evs) != 2 || evs[0].To != job.Queued || evs[1].To != job.InProgress || evs[1].Attempt != 1 {
		t.Fatalf("a1's events: %+v, %v", evs, err)
	}
	if evs, err := s.Events(ctx, FeedFilter{Since: time.Now().Add(time.Hour)}); err != nil || len(evs) != 0 {
		t.Fatalf("events since an hour ahead: %+v, %v", evs, err)
	}
}
