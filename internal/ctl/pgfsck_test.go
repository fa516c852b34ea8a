package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// pgOps is a fresh, migrated database whose attempts work under local
// (a host's local directory: local/scratch/<agent>/<id>), with a Ctl on
// the database whose --spool is local.
type pgOps struct {
	url, local string
	st         *pgstore.Store
}

func newPgOps(t *testing.T) *pgOps {
	t.Helper()
	url := testpg.NewDatabase(t, testpg.Start(t))
	if _, err := pgstore.Migrate(storeCtx(t), url); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	st, err := pgstore.Open(storeCtx(t), url, pgstore.WithScratch(filepath.Join(local, daemon.ScratchDir)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &pgOps{url: url, local: local, st: st}
}

func (p *pgOps) ctl(root string) (*ctl.Ctl, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &ctl.Ctl{Root: root, Store: p.url, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}, &out
}

func (p *pgOps) submit(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, errs := p.st.Submit(storeCtx(t), []job.SubmitRequest{{ID: id, Kind: "exec", Prompt: []byte(`{}`), Actor: "test"}}); errs[0] != nil {
			t.Fatal(errs[0])
		}
	}
}

func (p *pgOps) claim(t *testing.T, agent string, lease time.Duration) store.Claim {
	t.Helper()
	cs, err := p.st.Claim(storeCtx(t), job.Holder{Actor: "agentd/" + agent, Agent: agent}, store.ClaimOptions{Max: 1, Lease: lease})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v %v", cs, err)
	}
	return cs[0]
}

// fsck on a database: a healthy queue is clean (exit 0; a paused kind is
// a note), an expired lease is a finding (exit 1, nothing changed), in
// the spool's line format and as JSON; --repair takes it with one
// recovery pass (exit 0).
func TestStoreFsck(t *testing.T) {
	t.Parallel()
	p := newPgOps(t)
	ctx := storeCtx(t)
	if _, err := p.st.Register(ctx, pgstore.Registration{Kind: pgstore.KindAgentd, ID: "w1", Host: "h1", PID: 1, Fresh: time.Hour}); err != nil {
		t.Fatal(err)
	}
	p.submit(t, "done1", "run1", "late1")
	if err := p.claim(t, "w1", time.Hour).Commit(ctx, job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	p.claim(t, "w1", time.Hour)
	if _, err := p.st.PauseKind(ctx, pgstore.PausedKind{Kind: "exec", By: "farroctl", Reason: "db upgrade"}); err != nil {
		t.Fatal(err)
	}

	c, out := p.ctl(p.local)
	if err := c.Fsck(ctl.FsckOptions{Grace: ctl.DefaultGrace}); err != nil {
		t.Fatalf("healthy: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^paused-kind +paused_kinds: kind exec paused since \S+ by farroctl\b.*: db upgrade -> report only: not a problem; its queued jobs wait until farroctl resume exec\nfsck: clean\n$`).MatchString(out.String()) {
		t.Fatalf("healthy:\n%s", out)
	}
	if _, err := p.st.ResumeKind(ctx, "exec"); err != nil {
		t.Fatal(err)
	}

	// late1's lease ran out a moment ago; no watchdogd recovers it.
	p.claim(t, "w1", time.Millisecond)
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; { // the lease runs out on the database's clock
		c, out = p.ctl(p.local)
		if err = c.Fsck(ctl.FsckOptions{Grace: 0}); err != nil || time.Now().After(deadline) {
			break
		}
	}
	if ctl.ExitCode(err) != ctl.ExitFail || err.Error() != "fsck: 1 findings (1 repairable with --repair); nothing changed" {
		t.Fatalf("expired lease: %v", err)
	}
	if !regexp.MustCompile(`^lease-expired +late1 jobs: lease of agent w1 expired \S+ ago \(at \S+, database clock\); recovery has not taken it -> recover: one recovery pass moves it to stale, as watchdogd does \(is a watchdogd running on some host\?\)\n$`).MatchString(out.String()) {
		t.Fatalf("expired lease:\n%s", out)
	}
	if j, _ := p.st.Get(ctx, "late1"); j.Status != job.InProgress {
		t.Fatalf("fsck without --repair changed late1: %s", j.Status)
	}
	// A grace longer than its lateness: not reported.
	c, out = p.ctl(p.local)
	if err := c.Fsck(ctl.FsckOptions{Grace: time.Hour}); err != nil || out.String() != "fsck: clean\n" {
		t.Fatalf("within the grace: %v\n%s", err, out)
	}
	c, out = p.ctl(p.local)
	err = c.Fsck(ctl.FsckOptions{JSON: true})
	var f ctl.Finding
	if ctl.ExitCode(err) != ctl.ExitFail || json.Unmarshal(out.Bytes(), &f) != nil || f.Kind != pgstore.ProblemLeaseExpired || f.ID != "late1" || f.Path != "jobs" || f.Note {
		t.Fatalf("--json: %v %q", err, out)
	}
	c, out = p.ctl(p.local)
	if err := c.Fsck(ctl.FsckOptions{Repair: true}); err != nil {
		t.Fatalf("--repair: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "=> stale: in-progress -> stale (lease of agent w1 expired at ") || !strings.HasSuffix(out.String(), "fsck: 1 findings, all repaired\n") {
		t.Fatalf("--repair:\n%s", out)
	}
	j, err := p.st.Get(ctx, "late1")
	if err != nil || j.Status != job.Stale {
		t.Fatalf("late1 after --repair: %v %v", j, err)
	}
	evs, _ := p.st.History(ctx, "late1")
	if last := evs[len(evs)-1]; last.Actor != ctl.Actor || last.To != job.Stale {
		t.Fatalf("recovery event: %+v", last)
	}
	c, out = p.ctl(p.local)
	if err := c.Fsck(ctl.FsckOptions{}); err != nil || out.String() != "fsck: clean\n" {
		t.Fatalf("after --repair: %v\n%s", err, out)
	}
}

// A database at another schema version is one finding, read without
// opening the store (which refuses it), and nothing else is checked.
func TestStoreFsckSchema(t *testing.T) {
	t.Parallel()
	p := newPgOps(t)
	conn, err := pgx.Connect(storeCtx(t), p.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(storeCtx(t), `INSERT INTO farro_schema_version (version, name) VALUES ($1, 'future.sql')`, pgstore.SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	c, out := p.ctl(p.local)
	err = c.Fsck(ctl.FsckOptions{Repair: true})
	if ctl.ExitCode(err) != ctl.ExitFail || err.Error() != "fsck: 1 of 1 findings not repaired" {
		t.Fatalf("newer schema: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^schema-version +farro_schema_version: the database's schema is at version \d+, newer than this build's \d+ -> report only: upgrade farro .* => not repaired: report only\n$`).MatchString(out.String()) {
		t.Fatalf("newer schema:\n%s", out)
	}
}

// metrics on a database: the spool's queue gauges from the database,
// without the spool-only series; --textfile writes them.
func TestStoreMetrics(t *testing.T) {
	t.Parallel()
	p := newPgOps(t)
	p.submit(t, "m1", "m2", "m3")
	p.claim(t, "w1", time.Hour)
	c, out := p.ctl(p.local)
	if err := c.Metrics(ctl.MetricsOptions{Version: "1.2.3"}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"# HELP farro_jobs Jobs in the database, by state; every state is present, zeros included.\n# TYPE farro_jobs gauge\n",
		`farro_jobs{state="queued"} 2` + "\n", `farro_jobs{state="in-progress"} 1` + "\n", `farro_jobs{state="killed"} 0` + "\n",
		`farro_jobs_by_kind{kind="exec",state="queued"} 2` + "\n",
		`program="farroctl",version="1.2.3"} 1` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
	m2, _ := p.st.Get(storeCtx(t), "m2")
	oldest := regexp.MustCompile(`(?m)^farro_oldest_queued_job_timestamp_seconds (\S+)$`).FindStringSubmatch(text)
	if oldest == nil {
		t.Fatalf("no oldest queued job:\n%s", text)
	}
	if v, err := strconv.ParseFloat(oldest[1], 64); err != nil || math.Abs(v-float64(m2.CreatedAt.UnixNano())/1e9) > 1e-5 {
		t.Errorf("oldest queued %s, want m2's created_at %v", oldest[1], m2.CreatedAt)
	}
	for _, gone := range []string{"farro_claim_locks", "farro_corrupt_entries", "farro_spool_last_rescan"} {
		if strings.Contains(text, gone) {
			t.Errorf("metrics on a database have %s:\n%s", gone, text)
		}
	}
	dir := t.TempDir()
	c, out = p.ctl(p.local)
	if err := c.Metrics(ctl.MetricsOptions{Version: "1.2.3", Textfile: dir}); err != nil || out.Len() != 0 {
		t.Fatalf("--textfile: %v %q", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "farro.prom")); err != nil || string(b) != text {
		t.Fatalf("farro.prom: %v\n%s", err, b)
	}
}

// logs on a database: the attempt's output is printed from the local
// directory (--spool) as on a spool when it is there; else one line
// names the agent's host and the directory there (exit 1).
func TestStoreLogs(t *testing.T) {
	t.Parallel()
	p := newPgOps(t)
	ctx := storeCtx(t)
	if _, err := p.st.Register(ctx, pgstore.Registration{Kind: pgstore.KindAgentd, ID: "far1", Host: "far.example", PID: 1, Fresh: time.Hour}); err != nil {
		t.Fatal(err)
	}
	p.submit(t, "logjob", "farjob", "waiting")
	write := func(cl store.Claim, stdout, stderr string) {
		t.Helper()
		n := cl.Job().Attempts
		for name, text := range map[string]string{job.OutputName(job.Stdout, n): stdout, job.OutputName(job.Stderr, n): stderr} {
			if err := os.WriteFile(filepath.Join(cl.Dir(), name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Attempt 1 of logjob on w1 fails; attempt 2 on w2 succeeds.
	cl := p.claim(t, "w1", time.Hour)
	write(cl, "first out\n", "first err\n")
	if err := cl.Commit(ctx, job.Queued, "", nil); err != nil {
		t.Fatal(err)
	}
	cl = p.claim(t, "w2", time.Hour)
	if cl.Job().ID != "logjob" || cl.Job().Attempts != 2 {
		t.Fatalf("claimed %s attempt %d", cl.Job().ID, cl.Job().Attempts)
	}
	write(cl, "second out\n", "second err")
	if err := cl.Commit(ctx, job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	c, out := p.ctl(p.local)
	if err := c.Logs([]string{"logjob"}, ctl.LogsOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "==> stdout, attempt 2 <==\nsecond out\n\n==> stderr, attempt 2 <==\nsecond err\n"; out.String() != want {
		t.Fatalf("logs:\n%q\nwant\n%q", out, want)
	}
	c, out = p.ctl(p.local)
	if err := c.Logs([]string{"logjob"}, ctl.LogsOptions{Attempt: 1, Stderr: true}); err != nil || out.String() != "first err\n" {
		t.Fatalf("logs --attempt 1 --stderr: %v %q", err, out)
	}
	c, out = p.ctl(p.local)
	err := c.Logs([]string{"logjob"}, ctl.LogsOptions{Attempt: 3})
	if ctl.ExitCode(err) != ctl.ExitFail || err.Error() != "logjob: no output of attempt 3 (the job has had 2 attempt(s))" {
		t.Fatalf("attempt 3: %v", err)
	}

	// farjob ran on far1, registered on another host: its output is there.
	cl = p.claim(t, "far1", time.Hour)
	if err := os.RemoveAll(cl.Dir()); err != nil { // it is on far.example, not here
		t.Fatal(err)
	}
	c, out = p.ctl(p.local)
	err = c.Logs([]string{"farjob"}, ctl.LogsOptions{})
	if ctl.ExitCode(err) != ctl.ExitFail || out.Len() != 0 || strings.Contains(err.Error(), "\n") ||
		err.Error() != "farjob: attempt 1 ran on agent far1 on host far.example; its output is there, in scratch/far1/farjob/ (stdout.1.log, stderr.1.log) under its local directory: run farroctl logs on far.example with --spool set to it" {
		t.Fatalf("output on another host: %v", err)
	}
	// Another local directory than the agent's on this host: the same.
	c, _ = p.ctl(t.TempDir())
	err = c.Logs([]string{"logjob"}, ctl.LogsOptions{})
	if ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(err.Error(), "logjob: attempt 2 ran on agent w2 (its host is not in the agents table); its output is in scratch/w2/logjob/ (stdout.2.log, stderr.2.log)") {
		t.Fatalf("not in this local directory: %v", err)
	}
	c, _ = p.ctl(p.local)
	if err := c.Logs([]string{"waiting"}, ctl.LogsOptions{}); ctl.ExitCode(err) != ctl.ExitFail || err.Error() != "waiting: no output yet (queued, it has not run)" {
		t.Fatalf("never ran: %v", err)
	}
	if err := c.Logs([]string{"nosuchjob"}, ctl.LogsOptions{}); ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("no such job: %v", err)
	}
	// A symlink where the attempt's directory should be is not followed.
	cl = p.claim(t, "w3", time.Hour)
	if cl.Job().ID != "waiting" {
		t.Fatalf("claimed %s", cl.Job().ID)
	}
	if err := os.RemoveAll(cl.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), cl.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := c.Logs([]string{"waiting"}, ctl.LogsOptions{}); ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(err.Error(), "is not a directory (symlink or file): not read") {
		t.Fatalf("symlink: %v", err)
	}
}

// The completion of job IDs lists the database's jobs of the command's
// states that start with the prefix.
func TestStoreCompleteIDs(t *testing.T) {
	t.Parallel()
	p := newPgOps(t)
	p.submit(t, "alpha", "alpha1", "alpha2", "beta1")
	if err := p.claim(t, "w1", time.Hour).Commit(storeCtx(t), job.Killed, "", nil); err != nil { // alpha
		t.Fatal(err)
	}
	for _, tc := range []struct{ command, prefix, want string }{
		{"show", "alpha", "alpha\nalpha1\nalpha2\n"},
		{"show", "", "alpha\nalpha1\nalpha2\nbeta1\n"},
		{"hold", "alpha", "alpha1\nalpha2\n"},
		{"retry", "a", "alpha\n"},
		{"show", "zz", ""},
	} {
		c, out := p.ctl(p.local)
		if err := c.CompleteIDs(tc.command, tc.prefix); err != nil || out.String() != tc.want {
			t.Errorf("%s %q: %v %q, want %q", tc.command, tc.prefix, err, out, tc.want)
		}
	}
}
