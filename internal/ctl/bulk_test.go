package ctl_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// names lists a state directory as ls would (locks and dot files aside):
// the jobs it holds, sorted.
func (e *env) names(st job.State) []string {
	e.t.Helper()
	des, err := os.ReadDir(e.s.StateDir(st))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if n := de.Name(); !strings.HasPrefix(n, ".") && !strings.HasSuffix(n, job.LockSuffix) {
			out = append(out, n)
		}
	}
	return out
}

// plantMix plants, as of now: queued noop jobs qn-old (3h in its state)
// and qn-new, queued exec jobs qx-old (3h) and qx-new, a held noop job
// h-old (3h) and a killed noop job k-old (3h).
func (e *env) plantMix(now time.Time) {
	e.t.Helper()
	exec := func(r *job.SubmitRequest) { r.Kind = "exec" }
	e.submit("qn-old", nil)
	e.submit("qn-new", nil)
	e.submit("qx-old", exec)
	e.submit("qx-new", exec)
	e.submit("h-old", func(r *job.SubmitRequest) { r.Held = true })
	e.submit("k-old", nil)
	if _, err := e.s.Move("k-old", job.Queued, job.Killed, "test", "cancelled", nil); err != nil {
		e.t.Fatal(err)
	}
	for _, id := range []string{"qn-old", "qx-old", "h-old", "k-old"} {
		e.setUpdated(id, now.Add(-3*time.Hour))
	}
}

func TestBulkDryRunChangesNothing(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC()
	e.plantMix(now)
	now = now.Add(time.Minute) // the new jobs are a minute old
	before := tree(t, e.s.Root)
	cases := []struct {
		a    ctl.Action
		f    ctl.Filter
		want string
	}{
		{ctl.Cancel, ctl.Filter{States: []string{"queued"}}, "would cancel 4 jobs (state queued); run again with --all to do it"},
		{ctl.Cancel, ctl.Filter{States: []string{"queued"}, Kind: "exec"}, "would cancel 2 jobs (state queued, kind exec); run again with --all to do it"},
		{ctl.Kill, ctl.Filter{States: []string{"queued", "held"}, OlderThan: 2 * time.Hour}, "would kill 3 jobs (state queued,held, older than 2h); run again with --all to do it"},
		{ctl.Hold, ctl.Filter{States: []string{"queued"}, Kind: "exec", OlderThan: 90 * time.Minute}, "would hold 1 job (state queued, kind exec, older than 1h30m); run again with --all to do it"},
		{ctl.Remove, ctl.Filter{States: []string{"killed"}}, "would remove 1 job (state killed); run again with --all to do it"},
		{ctl.Release, ctl.Filter{States: []string{"held"}, Kind: "exec"}, "no jobs to release (state held, kind exec)"},
	}
	for _, c := range cases {
		cl := e.agesCtl(now)
		if err := cl.ActOn(c.a, nil, c.f, ctl.ActOptions{}); err != nil {
			t.Fatalf("%s %+v: %v (stderr %q)", c.a, c.f, err, e.stderr)
		}
		if got := strings.TrimSpace(e.stdout.String()); got != c.want {
			t.Errorf("%s %+v: got %q, want %q", c.a, c.f, got, c.want)
		}
		if e.stderr.Len() != 0 {
			t.Errorf("%s %+v: stderr %q", c.a, c.f, e.stderr)
		}
	}
	if after := tree(t, e.s.Root); after != before {
		t.Fatalf("a dry run changed the spool:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestBulkAllActsOnExactlyTheMatchingJobs(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC()
	e.plantMix(now)
	now = now.Add(time.Minute) // the new jobs are a minute old
	cl := e.agesCtl(now)
	f := ctl.Filter{States: []string{"queued"}, Kind: "noop", OlderThan: time.Hour, All: true}
	if err := cl.ActOn(ctl.Cancel, nil, f, ctl.ActOptions{Note: "bulk"}); err != nil {
		t.Fatalf("cancel: %v (stderr %q)", err, e.stderr)
	}
	if got, want := strings.TrimSpace(e.stdout.String()), "cancel 1 job (state queued, kind noop, older than 1h): done 1, failed 0"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	if got, want := e.names(job.Queued), []string{"qn-new", "qx-new", "qx-old"}; !slices.Equal(got, want) {
		t.Errorf("incoming/ %q, want %q", got, want)
	}
	if got, want := e.names(job.Killed), []string{"k-old", "qn-old"}; !slices.Equal(got, want) {
		t.Errorf("completed/killed/ %q, want %q", got, want)
	}
	if j := e.read("qn-old"); j.Reason != job.ReasonCancelled+": bulk" {
		t.Errorf("reason %q", j.Reason)
	}

	// Two states at once, no job.json needed: every held and queued job.
	cl = e.agesCtl(now)
	if err := cl.ActOn(ctl.Hold, nil, ctl.Filter{States: []string{"queued"}, All: true}, ctl.ActOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := e.names(job.Held), []string{"h-old", "qn-new", "qx-new", "qx-old"}; !slices.Equal(got, want) {
		t.Errorf("held/ %q, want %q", got, want)
	}
	if len(e.names(job.Queued)) != 0 {
		t.Errorf("incoming/ still holds %q", e.names(job.Queued))
	}
	// rm of the killed ones, then retry finds nothing.
	cl = e.agesCtl(now)
	if err := cl.ActOn(ctl.Remove, nil, ctl.Filter{States: []string{"killed"}, All: true}, ctl.ActOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(e.stdout.String()); got != "remove 2 jobs (state killed): done 2, failed 0" {
		t.Errorf("rm summary %q", got)
	}
	if n := e.names(job.Killed); len(n) != 0 {
		t.Errorf("killed left: %q", n)
	}
}

// A selected job that fails is one stderr line and exit 1; the others
// are still done.
func TestBulkReportsFailures(t *testing.T) {
	e := newEnv(t)
	e.submit("ok1", func(r *job.SubmitRequest) { r.Held = true })
	e.submit("busy", func(r *job.SubmitRequest) { r.Held = true })
	e.submit("ok2", func(r *job.SubmitRequest) { r.Held = true })
	// busy's lock is held by a live process (this one): release cannot
	// take it.
	if err := fsq.TryLock(e.s.LockPath("busy"), []byte(`{"pid":1}`)); err != nil {
		t.Fatal(err)
	}
	err := e.ctl("").ActOn(ctl.Release, nil, ctl.Filter{States: []string{"held"}, All: true}, ctl.ActOptions{Retries: 2, Backoff: time.Millisecond})
	if ctl.ExitCode(err) != 1 {
		t.Fatalf("exit %d (%v), want 1", ctl.ExitCode(err), err)
	}
	if got := strings.TrimSpace(e.stdout.String()); got != "release 3 jobs (state held): done 2, failed 1" {
		t.Errorf("summary %q", got)
	}
	if l := lines(e.stderr.String()); len(l) != 1 || !strings.HasPrefix(l[0], "farroctl: busy: busy") {
		t.Errorf("stderr %q, want one line for busy", l)
	}
	if got := e.names(job.Held); !slices.Equal(got, []string{"busy"}) {
		t.Errorf("held/ %q", got)
	}
}

func TestBulkRefusals(t *testing.T) {
	e := newEnv(t)
	e.submit("q1", nil)
	before := tree(t, e.s.Root)
	cases := []struct {
		a    ctl.Action
		ids  []string
		f    ctl.Filter
		o    ctl.ActOptions
		want string
	}{
		{ctl.Cancel, []string{"q1"}, ctl.Filter{States: []string{"queued"}, All: true}, ctl.ActOptions{}, "cancel: give job IDs or a filter (--state), not both"},
		{ctl.Remove, nil, ctl.Filter{States: []string{"queued"}, All: true}, ctl.ActOptions{}, "rm --state queued: rm takes succeeded or killed jobs"},
		{ctl.Release, nil, ctl.Filter{States: []string{"failed"}}, ctl.ActOptions{}, "release --state failed: release takes held jobs"},
		{ctl.Retry, nil, ctl.Filter{States: []string{"succeeded"}}, ctl.ActOptions{}, "retry --state succeeded: retry takes killed jobs (add --succeeded to run succeeded jobs again)"},
		{ctl.Requeue, nil, ctl.Filter{States: []string{"in-progress"}}, ctl.ActOptions{}, "requeue --state in-progress: requeue takes deferred, stale or failed jobs"},
		{ctl.Cancel, nil, ctl.Filter{Kind: "exec", All: true}, ctl.ActOptions{}, "cancel: --kind, --older-than and --all select jobs with --state S"},
		{ctl.Cancel, nil, ctl.Filter{States: []string{"nope"}}, ctl.ActOptions{}, `unknown state "nope"`},
	}
	for _, c := range cases {
		err := e.ctl("").ActOn(c.a, c.ids, c.f, c.o)
		if ctl.ExitCode(err) != 2 || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s %q %+v: %v (exit %d), want %q", c.a, c.ids, c.f, err, ctl.ExitCode(err), c.want)
		}
	}
	if tree(t, e.s.Root) != before {
		t.Fatal("a refused filter changed the spool")
	}
	// retry --succeeded takes succeeded jobs.
	c := e.claim("done")
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").ActOn(ctl.Retry, nil, ctl.Filter{States: []string{"succeeded"}}, ctl.ActOptions{Succeeded: true}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(e.stdout.String()); got != "would retry 1 job (state succeeded); run again with --all to do it" {
		t.Errorf("retry --succeeded dry run: %q", got)
	}
}

// --state alone lists the state directory and reads no job.json: a job
// whose job.json is garbage is still selected (and then fails), while
// --kind, which must read it, leaves it out and says so.
func TestBulkStateAloneReadsNoJobFile(t *testing.T) {
	e := newEnv(t)
	e.submit("good", nil)
	e.submit("garbled", nil)
	if err := os.WriteFile(filepath.Join(e.where("garbled").Dir, job.JobFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").ActOn(ctl.Cancel, nil, ctl.Filter{States: []string{"queued"}}, ctl.ActOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(e.stdout.String()); !strings.HasPrefix(got, "would cancel 2 jobs") || e.stderr.Len() != 0 {
		t.Errorf("--state alone: stdout %q stderr %q", got, e.stderr)
	}
	if err := e.ctl("").ActOn(ctl.Cancel, nil, ctl.Filter{States: []string{"queued"}, Kind: "noop"}, ctl.ActOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(e.stdout.String()); !strings.HasPrefix(got, "would cancel 1 job ") {
		t.Errorf("--kind: stdout %q", got)
	}
	if got := strings.TrimSpace(e.stderr.String()); got != "farroctl: 1 job with an unreadable job.json not selected (farroctl fsck)" {
		t.Errorf("--kind: stderr %q", got)
	}
}

// A selected job that leaves the selected state (or the spool) before
// the action reaches it is skipped, not acted on in its new state.
func TestBulkSkipsJobsThatLeftTheirState(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"a", "b", "c"} {
		e.submit(id, nil)
	}
	ctl.SetSelectedHook(t, func(ids []string) {
		if !slices.Equal(ids, []string{"a", "b", "c"}) {
			t.Errorf("selected %q", ids)
		}
		if _, err := e.s.Move("a", job.Queued, job.Held, "test", "held", nil); err != nil {
			t.Error(err)
		}
		if _, err := e.s.Move("b", job.Queued, job.Killed, "test", "cancelled", nil); err != nil {
			t.Error(err)
		}
		if _, err := e.s.Remove("b", "test"); err != nil {
			t.Error(err)
		}
	})
	if err := e.ctl("").ActOn(ctl.Cancel, nil, ctl.Filter{States: []string{"queued"}, All: true}, ctl.ActOptions{}); err != nil {
		t.Fatalf("%v (stderr %q)", err, e.stderr)
	}
	if got, want := strings.TrimSpace(e.stdout.String()), "cancel 3 jobs (state queued): done 1, failed 0, skipped 2 (no longer queued)"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	if got := e.names(job.Held); !slices.Equal(got, []string{"a"}) {
		t.Errorf("held/ %q: the job that left queued was acted on", got)
	}
	if got := e.names(job.Killed); !slices.Equal(got, []string{"c"}) {
		t.Errorf("killed/ %q", got)
	}
}
