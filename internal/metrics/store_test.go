package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/internal/tally"
	"github.com/farro-dev/farro/pkg/job"
)

// gatherText renders r's families in the text format.
func gatherText(t *testing.T, r *prometheus.Registry) string {
	t.Helper()
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// FollowStore exports what its reads return, as tally.StoreText renders
// it (byte for byte, build info aside), nothing after a failed read, and
// nothing once it has stopped. Not parallel: it feeds the process's
// store collector.
func TestFollowStore(t *testing.T) {
	r := prometheus.NewRegistry()
	r.MustRegister(storeC)
	if text := gatherText(t, r); text != "" {
		t.Fatalf("before a read: %q", text)
	}
	snap := spoolview.Snapshot{States: map[job.State]int{job.Queued: 3, job.InProgress: 1}, QueuedKinds: map[string]int{"exec": 2, "someone.else": 1},
		OldestQueued: time.Unix(1700000000, 500000000)}
	for _, st := range job.States {
		snap.States[st] += 0
	}
	reads := make(chan error)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var errs []error
	go func() {
		defer close(done)
		FollowStore(ctx, func(context.Context) (spoolview.Snapshot, error) {
			err := <-reads
			return snap, err
		}, time.Millisecond, func(err error) { errs = append(errs, err) })
	}()
	waitText := func(what string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			text := gatherText(t, r)
			if ok(text) {
				return text
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q", what, text)
			}
			time.Sleep(time.Millisecond)
		}
	}
	reads <- nil
	text := waitText("after a read", func(s string) bool { return s != "" })
	ready := snap
	ready.Ready = true
	want := string(tally.StoreText("managerd", "v", ready))
	want = want[strings.Index(want, "# HELP farro_jobs "):]
	if text != want {
		t.Errorf("exported:\n%s\nwant:\n%s", text, want)
	}
	reads <- errors.New("connection refused")
	waitText("after a failed read", func(s string) bool { return s == "" })
	reads <- nil
	waitText("after the next read", func(s string) bool { return s == want })
	cancel()
	select {
	case reads <- nil: // a read under way when ctx ended
	case <-done:
	}
	<-done
	if text := gatherText(t, r); text != "" || len(errs) != 1 || errs[0].Error() != "connection refused" {
		t.Fatalf("after it stopped: %q, errors %v", text, errs)
	}
}
