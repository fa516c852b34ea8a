package pgstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// TestListNewestFirst: the jobs a filter selects, highest ID first,
// across its pages (more jobs than newestPage), from below a cursor, up
// to a limit; fn's error stops it; filters it cannot honour are refused.
func TestListNewestFirst(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	var reqs []job.SubmitRequest
	for i := range newestPage + 30 {
		r := job.SubmitRequest{ID: fmt.Sprintf("j%04d", i), Kind: "noop"}
		if i%3 == 0 {
			r.Kind, r.Held = "exec", true
		}
		reqs = append(reqs, r)
	}
	submit(t, s, reqs...)
	list := func(f store.Filter, before string) []string {
		t.Helper()
		var ids []string
		if err := s.ListNewestFirst(ctxT(t), f, before, func(j *job.Job) error { ids = append(ids, j.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	all := list(store.Filter{}, "")
	if len(all) != newestPage+30 || all[0] != fmt.Sprintf("j%04d", newestPage+29) || all[len(all)-1] != "j0000" {
		t.Fatalf("all: %d jobs, %v ... %v", len(all), all[:1], all[len(all)-1:])
	}
	if !slices.IsSortedFunc(all, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Fatalf("not newest first: %v", all)
	}
	held := list(store.Filter{States: []job.State{job.Held}, Kinds: []string{"exec"}}, "j0010")
	if want := []string{"j0009", "j0006", "j0003", "j0000"}; !slices.Equal(held, want) {
		t.Errorf("held exec below j0010: %v, want %v", held, want)
	}
	// j0129 is held (every third job), so the queued ones begin at j0128.
	if got, want := list(store.Filter{States: []job.State{job.Queued}, Limit: 3}, ""), []string{"j0128", "j0127", "j0125"}; !slices.Equal(got, want) {
		t.Errorf("queued, limit 3: %v, want %v", got, want)
	}
	stop := errors.New("stop")
	n := 0
	err := s.ListNewestFirst(ctxT(t), store.Filter{}, "", func(*job.Job) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn's error: %v after %d jobs", err, n)
	}
	if err := s.ListNewestFirst(ctxT(t), store.Filter{AfterID: "j0001"}, "", func(*job.Job) error { return nil }); err == nil {
		t.Error("AfterID accepted")
	}
}
