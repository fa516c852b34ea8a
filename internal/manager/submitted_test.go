package manager

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// tally records what a SubmissionTail counts, by the label values the
// metric would use.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *tally) count(kind, actor string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[metrics.KindLabel(kind)+" "+metrics.ActorLabel(actor)]++
}

func appendStream(t *testing.T, s *job.Spool, text string) {
	t.Helper()
	f, err := os.OpenFile(s.Path(job.StreamDir, job.StreamSegment(time.Now())), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// Submissions are counted from the event stream: every submit after the
// tail started (to incoming/, deferred/ or held/), by kind and program,
// and nothing else: not what was submitted before, not the claims and
// commits, not lines that are not transitions from no state. A hostile
// kind counts as other; an over-long line, a line cut in two by a read
// and a FIFO named like a segment neither crash nor block it.
func TestSubmissionsCounted(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	e.submit(t, "before", 0) // history: not counted
	c := &tally{n: map[string]int{}}
	tail, err := NewSubmissionTail(spoolstore.New(e.s), c.count)
	if err != nil {
		t.Fatal(err)
	}
	e.submit(t, "a", 0)
	e.submit(t, "b", 0)
	if _, err := e.s.Submit(job.SubmitRequest{ID: "later", Kind: "exec", NotBefore: time.Now().Add(time.Hour), Prompt: []byte(`{}`), Actor: "managerd/frontier"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Submit(job.SubmitRequest{ID: "mine", Kind: "my.kind", Held: true, Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	cl, err := e.s.Claim("a", holder)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	hostile := strings.Repeat("x", 1000)
	appendStream(t, e.s, `{"actor":"farroctl","job_id":"h","kind":"`+hostile+`","event":{"type":"state_transition","to":"queued"}}`+"\n"+
		`{"actor":"farroctl","event":{"type":"operator","command":"submit"}}`+"\n"+
		"not json\n"+
		`{"actor":"`+strings.Repeat("y", 2*job.MaxStreamLine)+`","job_id":"long","event":{"type":"state_transition","to":"queued"}}`+"\n"+
		`{"actor":"someone","job_id":"cut","kind":"noop","event":{"type":"state_`)
	if err := tail.Poll(); err != nil {
		t.Fatal(err)
	}
	appendStream(t, e.s, `transition","to":"queued"}}`+"\n")
	// A FIFO named like the next hour's segment: refused, reported, and
	// the segments before it still read.
	fifo := e.s.Path(job.StreamDir, job.StreamSegment(time.Now().Add(time.Hour)))
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tail.Poll() }()
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Poll blocked on a FIFO")
	}
	if !errors.Is(err, fsq.ErrNotRegular) {
		t.Errorf("Poll with a FIFO segment: %v, want ErrNotRegular", err)
	}
	want := map[string]int{"noop farroctl": 2, "exec managerd": 1, "other farroctl": 2, "noop other": 1}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.n) != len(want) {
		t.Errorf("counted %v, want %v", c.n, want)
	}
	for k, n := range want {
		if c.n[k] != n {
			t.Errorf("counted %v, want %v", c.n, want)
			break
		}
	}
}
