package ctl_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// backend is one place farroctl's commands run on: a spool, or a
// PostgreSQL store, with the seam's view of it for setting jobs up and
// checking the commands' effects.
type backend struct {
	name string
	st   store.Store
	ctl  func(stdin string) (*ctl.Ctl, *bytes.Buffer, *bytes.Buffer)
}

func storeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func spoolBackend(t *testing.T) *backend {
	root := filepath.Join(t.TempDir(), "spool")
	st, err := spoolstore.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return &backend{name: "spool", st: st, ctl: func(stdin string) (*ctl.Ctl, *bytes.Buffer, *bytes.Buffer) {
		var out, errb bytes.Buffer
		return &ctl.Ctl{Root: root, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb}, &out, &errb
	}}
}

// pgBackend is a fresh, migrated database of the test binary's private
// PostgreSQL. The Ctl's Root names no spool: nothing may use it.
func pgBackend(t *testing.T) *backend {
	url := testpg.NewDatabase(t, testpg.Start(t))
	if _, err := pgstore.Migrate(storeCtx(t), url); err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.Open(storeCtx(t), url, pgstore.WithScratch(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	nospool := filepath.Join(t.TempDir(), "no-such-spool")
	return &backend{name: "postgres", st: st, ctl: func(stdin string) (*ctl.Ctl, *bytes.Buffer, *bytes.Buffer) {
		var out, errb bytes.Buffer
		return &ctl.Ctl{Root: nospool, Store: url, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb}, &out, &errb
	}}
}

// setUp gives b the same jobs through the seam: one succeeded, one
// failed, two running (their claims returned), each an exec job.
func (b *backend) setUp(t *testing.T) map[string]store.Claim {
	ctx := storeCtx(t)
	h := job.Holder{Actor: "agentd/t1", Agent: "t1"}
	running := map[string]store.Claim{}
	for _, step := range []struct {
		id string
		to job.State
	}{{"jobfff1", job.Succeeded}, {"jobggg1", job.Failed}, {"jobeee1", job.InProgress}, {"jobiii1", job.InProgress}} {
		if _, errs := b.st.Submit(ctx, []job.SubmitRequest{{ID: step.id, Kind: "exec", MaxAttempts: 3, Prompt: []byte(`{"cmd":"true"}`), Actor: "test"}}); errs[0] != nil {
			t.Fatalf("%s: submit %s: %v", b.name, step.id, errs[0])
		}
		cs, err := b.st.Claim(ctx, h, store.ClaimOptions{Max: 1, Lease: time.Hour})
		if err != nil || len(cs) != 1 || cs[0].Job().ID != step.id {
			t.Fatalf("%s: claim of %s: %v %v", b.name, step.id, cs, err)
		}
		if step.to == job.InProgress {
			running[step.id] = cs[0]
			continue
		}
		if err := cs[0].Commit(ctx, step.to, "exit status", nil); err != nil {
			t.Fatalf("%s: commit %s: %v", b.name, step.id, err)
		}
	}
	return running
}

// masks hide what differs between two runs whatever the store: times,
// generated IDs, durations, a job's directory (a database job has none),
// correlation ids, and claim locks (lock directories are the spool's).
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{8}T\d{6}\.\d+Z-[0-9a-f]+`), "<ID>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<TIME>"},
	{regexp.MustCompile(`"(dir|correlation_id|claim_token)": ?"[^"]*"`), `"$1":"<X>"`},
	{regexp.MustCompile(`"(oldest_queued_age_seconds|locks)": ?[0-9.]+`), `"$1":<N>`},
	{regexp.MustCompile(`\(in [0-9hms.]+\)`), "(in <D>)"},
	{regexp.MustCompile(`(oldest queued|locks)\s+\S+`), "$1 <N>"},
	{regexp.MustCompile(`[ \t]+`), " "},
}

func mask(s string) string {
	for _, m := range masks {
		s = m.re.ReplaceAllString(s, m.with)
	}
	return s
}

// Every command farroctl runs on PostgreSQL prints what it prints on a
// spool holding the same jobs, with the same exit code, and the actions
// change the jobs alike (checked through the seam).
func TestStoreCommandsMatchSpool(t *testing.T) {
	t.Parallel()
	backends := []*backend{spoolBackend(t), pgBackend(t)}
	claims := map[string]map[string]store.Claim{}
	for _, b := range backends {
		claims[b.name] = b.setUp(t)
	}
	steps := []struct {
		name  string
		stdin string
		run   func(c *ctl.Ctl) error
	}{
		{"submit", `{"n":1}`, func(c *ctl.Ctl) error { return c.Submit(ctl.SubmitOptions{ID: "jobaaa1", Priority: 5, Kind: "noop"}) }},
		{"submit generated ID", `{"n":2}`, func(c *ctl.Ctl) error { return c.Submit(ctl.SubmitOptions{Priority: 4}) }},
		{"submit duplicate", `{}`, func(c *ctl.Ctl) error { return c.Submit(ctl.SubmitOptions{ID: "jobaaa1"}) }},
		{"submit --held", `{}`, func(c *ctl.Ctl) error { return c.Submit(ctl.SubmitOptions{ID: "jobccc1", Held: true, MaxAttempts: 7}) }},
		{"submit --in", `{}`, func(c *ctl.Ctl) error { return c.Submit(ctl.SubmitOptions{ID: "jobddd1", In: time.Hour}) }},
		{"submit --batch", "{\"id\":\"jobbbb1\",\"priority\":1,\"prompt\":{\"b\":1}}\n{\"priority\":3,\"prompt\":{}}\nnot json\n{\"id\":\"jobhhh1\",\"priority\":2,\"prompt\":{\"h\":1}}\n",
			func(c *ctl.Ctl) error { return c.Submit(ctl.SubmitOptions{Batch: true}) }},
		{"ls", "", func(c *ctl.Ctl) error { return c.List(ctl.ListOptions{}) }},
		{"ls --json", "", func(c *ctl.Ctl) error { return c.List(ctl.ListOptions{JSON: true}) }},
		{"ls --state", "", func(c *ctl.Ctl) error { return c.List(ctl.ListOptions{States: []string{"held,queued"}}) }},
		{"ls --state bad", "", func(c *ctl.Ctl) error { return c.List(ctl.ListOptions{States: []string{"nope"}}) }},
		{"show", "", func(c *ctl.Ctl) error { return c.Show([]string{"jobaaa1"}) }},
		{"show by prefix", "", func(c *ctl.Ctl) error { return c.Show([]string{"jobccc"}) }},
		{"show missing", "", func(c *ctl.Ctl) error { return c.Show([]string{"nosuch"}) }},
		{"stats", "", func(c *ctl.Ctl) error { return c.Stats(false) }},
		{"stats --json", "", func(c *ctl.Ctl) error { return c.Stats(true) }},
		{"stats --ages", "", func(c *ctl.Ctl) error { return c.StatsAges(false) }},
		{"stats --ages --json", "", func(c *ctl.Ctl) error { return c.StatsAges(true) }},
		{"history", "", func(c *ctl.Ctl) error { return c.History([]string{"jobfff1"}, ctl.HistoryOptions{}) }},
		{"history --json", "", func(c *ctl.Ctl) error { return c.History([]string{"jobggg1"}, ctl.HistoryOptions{JSON: true}) }},
		{"hold", "", func(c *ctl.Ctl) error {
			return c.ActOn(ctl.Hold, []string{"jobaaa1", "jobfff1", "nosuch"}, ctl.Filter{}, ctl.ActOptions{Note: "later"})
		}},
		{"release", "", func(c *ctl.Ctl) error {
			return c.ActOn(ctl.Release, []string{"jobccc1"}, ctl.Filter{}, ctl.ActOptions{})
		}},
		{"cancel", "", func(c *ctl.Ctl) error {
			return c.ActOn(ctl.Cancel, []string{"jobbbb1"}, ctl.Filter{}, ctl.ActOptions{})
		}},
		{"kill a running job", "", func(c *ctl.Ctl) error { return c.ActOn(ctl.Kill, []string{"jobeee1"}, ctl.Filter{}, ctl.ActOptions{}) }},
		{"requeue", "", func(c *ctl.Ctl) error {
			return c.ActOn(ctl.Requeue, []string{"jobggg1", "jobddd1"}, ctl.Filter{}, ctl.ActOptions{})
		}},
		{"retry", "", func(c *ctl.Ctl) error { return c.ActOn(ctl.Retry, []string{"jobbbb1"}, ctl.Filter{}, ctl.ActOptions{}) }},
		{"retry succeeded refused", "", func(c *ctl.Ctl) error { return c.ActOn(ctl.Retry, []string{"jobfff1"}, ctl.Filter{}, ctl.ActOptions{}) }},
		{"rm", "", func(c *ctl.Ctl) error {
			return c.ActOn(ctl.Remove, []string{"jobfff1"}, ctl.Filter{}, ctl.ActOptions{})
		}},
		{"cancel --state dry run", "", func(c *ctl.Ctl) error {
			return c.ActOn(ctl.Cancel, nil, ctl.Filter{States: []string{"queued"}, Kind: "exec"}, ctl.ActOptions{})
		}},
		{"hold --state --all", "", func(c *ctl.Ctl) error {
			return c.ActOn(ctl.Hold, nil, ctl.Filter{States: []string{"queued"}, Kind: "exec", All: true}, ctl.ActOptions{})
		}},
		{"ls after", "", func(c *ctl.Ctl) error { return c.List(ctl.ListOptions{}) }},
	}
	for _, step := range steps {
		var want string
		for i, b := range backends {
			c, out, errb := b.ctl(step.stdin)
			err := step.run(c)
			got := mask("exit " + string(rune('0'+ctl.ExitCode(err))) + "\nstdout:\n" + out.String() + "stderr:\n" + errb.String())
			if i == 0 {
				want = got
				continue
			}
			if got != want {
				t.Errorf("%s: %s prints\n%s\nthe spool\n%s", step.name, b.name, got, want)
			}
		}
	}

	// The actions' effects, through the seam.
	for _, b := range backends {
		ctx := storeCtx(t)
		// Every queued exec job was held last (hold --state queued --all).
		for id, st := range map[string]job.State{"jobaaa1": job.Held, "jobccc1": job.Held, "jobbbb1": job.Held,
			"jobggg1": job.Held, "jobddd1": job.Held, "jobeee1": job.InProgress, "jobhhh1": job.Held} {
			j, err := b.st.Get(ctx, id)
			if err != nil || j.Status != st {
				t.Errorf("%s: %s: %v, %v; want %s", b.name, id, j, err, st)
			}
		}
		evs, err := b.st.History(ctx, "jobbbb1")
		if n := len(evs); err != nil || n < 3 || evs[n-2].From != job.Killed || evs[n-2].To != job.Queued || evs[n-2].Reason != job.ReasonRetried || evs[n-3].Reason != job.ReasonCancelled {
			t.Errorf("%s: history of the cancelled, then retried job: %+v %v", b.name, evs, err)
		}
		if _, err := b.st.Get(ctx, "jobfff1"); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("%s: removed job: %v", b.name, err)
		}
		evs, err = b.st.History(ctx, "jobaaa1")
		if err != nil || len(evs) == 0 || evs[len(evs)-1].Actor != ctl.Actor || evs[len(evs)-1].To != job.Held || evs[len(evs)-1].Reason != job.ReasonHeld+": later" {
			t.Errorf("%s: history of the held job: %+v %v", b.name, evs, err)
		}
		pc, err := claims[b.name]["jobeee1"].PendingControl(ctx)
		if err != nil || pc == nil || pc.Action != job.ControlKill || pc.Actor != ctl.Actor {
			t.Errorf("%s: the running job's request: %+v %v", b.name, pc, err)
		}
	}
}

// commitWhenAsked commits claim cl to what the operator's request asks
// for, once the request is there.
func commitWhenAsked(ctx context.Context, cl store.Claim, to job.State) error {
	for {
		pc, err := cl.PendingControl(ctx)
		if err != nil {
			return err
		}
		if pc != nil {
			return cl.Commit(ctx, to, job.ReasonHeld, nil)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// An action with --wait on a running job reports the outcome once the
// job's holder has carried the request out, on either store.
func TestStoreActionWaits(t *testing.T) {
	t.Parallel()
	var want string
	for i, b := range []*backend{spoolBackend(t), pgBackend(t)} {
		cl := b.setUp(t)["jobiii1"]
		ctx := storeCtx(t)
		done := make(chan error, 1)
		go func() { done <- commitWhenAsked(ctx, cl, job.Held) }()
		c, out, errb := b.ctl("")
		err := c.ActOn(ctl.Hold, []string{"jobiii1"}, ctl.Filter{}, ctl.ActOptions{Wait: 20 * time.Second})
		if cerr := <-done; cerr != nil {
			t.Fatalf("%s: the holder's commit: %v", b.name, cerr)
		}
		if err != nil || out.String() != "jobiii1: in-progress -> held\n" || errb.Len() != 0 {
			t.Fatalf("%s: hold --wait: %v, %q %q", b.name, err, out, errb)
		}
		got := mask(out.String())
		if i > 0 && got != want {
			t.Errorf("%s: hold --wait printed %q, the spool %q", b.name, got, want)
		}
		want = got
		if j, err := b.st.Get(ctx, "jobiii1"); err != nil || j.Status != job.Held {
			t.Errorf("%s: after hold --wait: %+v %v", b.name, j, err)
		}
	}
}

// On a database, a command that works on a spool only fails at once with
// one usage line naming it and its database equivalent.
func TestStoreSpoolOnlyRefused(t *testing.T) {
	t.Parallel()
	err := ctl.SpoolOnly("init")
	if ctl.ExitCode(err) != ctl.ExitUsage || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "init works on a spool only for now") || !strings.Contains(err.Error(), "farroctl migrate creates the schema") {
		t.Fatalf("init: %v", err)
	}
}
