package tally

import (
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/pkg/job"
)

// recorder is a Sink that remembers what it was told.
type recorder struct{ calls []string }

func (r *recorder) add(s string)                            { r.calls = append(r.calls, s) }
func (r *recorder) ClaimDone(l, w time.Duration)            { r.add("claim " + l.String() + " " + w.String()) }
func (r *recorder) ClaimFailed(reason string)               { r.add("claim-failed " + reason) }
func (r *recorder) CommitDone(kind string, l time.Duration) { r.add("commit " + kind) }
func (r *recorder) RunFinished(kind, outcome string, _ time.Duration) {
	r.add("run " + kind + " " + outcome)
}
func (r *recorder) SetSlots(n int)                             { r.add("slots") }
func (r *recorder) SlotBusy(d int)                             { r.add("busy") }
func (r *recorder) CrawlFetched(c string, status int, b int64) { r.add("fetched " + c) }
func (r *recorder) CrawlRobotsDenied(c string)                 { r.add("denied " + c) }

// Without a Sink (a program that does not link internal/metrics) the
// counting functions do nothing; with one, each reaches it once. Not
// parallel: it swaps the package's Sink.
func TestCountsReachTheSink(t *testing.T) {
	count := func() {
		ClaimDone(time.Millisecond, time.Second)
		ClaimFailed("locked")
		CommitDone("exec", time.Millisecond)
		RunFinished("exec", OutcomeSucceeded, time.Second)
		SetSlots(2)
		SlotBusy(1)
		CrawlFetched("c", 200, 10)
		CrawlRobotsDenied("c")
	}
	count() // the nop Sink
	r := &recorder{}
	old := sink
	SetSink(r)
	t.Cleanup(func() { SetSink(old) })
	count()
	want := "claim 1ms 1s|claim-failed locked|commit exec|run exec succeeded|slots|busy|fetched c|denied c"
	if got := strings.Join(r.calls, "|"); got != want {
		t.Errorf("the Sink got %s, want %s", got, want)
	}
}

// Before the view's first listing only build info is written (no zeros
// that would be wrong); after, every state and every kind label is there,
// a kind farro does not know counted as other.
func TestSpoolText(t *testing.T) {
	text := string(SpoolText("farroctl", "1.2.3", spoolview.Snapshot{}))
	if !strings.HasPrefix(text, "# HELP farro_build_info ") || !strings.Contains(text, `program="farroctl",version="1.2.3"} 1`+"\n") ||
		strings.Contains(text, "farro_jobs") {
		t.Fatalf("before the first listing:\n%s", text)
	}
	snap := spoolview.Snapshot{Ready: true, States: map[job.State]int{job.Queued: 3},
		QueuedKinds: map[string]int{"exec": 1, "weird\nkind": 2}, Locks: 1}
	text = string(SpoolText("farroctl", "1.2.3", snap))
	for _, want := range []string{
		`farro_jobs{state="queued"} 3` + "\n", `farro_jobs{state="held"} 0` + "\n",
		`farro_jobs_by_kind{kind="exec",state="queued"} 1` + "\n", `farro_jobs_by_kind{kind="other",state="queued"} 2` + "\n",
		`farro_jobs_by_kind{kind="source.check",state="queued"} 0` + "\n",
		"farro_claim_locks 1\n", "farro_oldest_queued_job_timestamp_seconds 0\n", "# TYPE farro_jobs gauge\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "weird") {
		t.Errorf("a job's own kind became a label value:\n%s", text)
	}
}
