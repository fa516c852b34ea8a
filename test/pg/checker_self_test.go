package pg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// The checker finds each kind of violation the storms look for, each in
// its own count, on jobs made to break one rule each through the store,
// and says nothing of a job that ran once and succeeded.
func TestCheckerCountsEachViolation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := testpg.NewDatabase(t, testpg.Start(t))
	if out, err := exec.Command(filepath.Join(bins.Dir(t), "farroctl"), "migrate", "--store", url).CombinedOutput(); err != nil {
		t.Fatalf("farroctl migrate: %v\n%s", err, out)
	}
	st, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var lines []string
	line := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	submit := func(id string, maxAttempts int) {
		if _, errs := st.Submit(ctx, []job.SubmitRequest{{ID: id, Kind: "exec", Prompt: []byte(`{}`), Actor: "test", MaxAttempts: maxAttempts}}); errs != nil && errs[0] != nil {
			t.Fatal(errs[0])
		}
	}
	// run claims id, records an execution on agent (ran: with its end
	// line) and commits it to the state to.
	run := func(id, agent string, ran bool, to job.State) string {
		cs, err := st.Claim(ctx, job.Holder{Actor: "test", Agent: agent}, store.ClaimOptions{Max: 1, Lease: time.Minute})
		if err != nil || len(cs) != 1 || cs[0].Job().ID != id {
			t.Fatalf("claim of %s: %v (%d claims)", id, err, len(cs))
		}
		tok := cs[0].Token()
		if ran {
			line("start %s %s %d %s %d", id, tok, cs[0].Job().Attempts, agent, time.Now().UnixNano())
			line("end %s %s", id, tok)
		}
		if err := cs[0].Commit(ctx, to, "test", nil); err != nil {
			t.Fatal(err)
		}
		return tok
	}

	submit("ok", 3)
	okTok := run("ok", "w1", true, job.Succeeded)
	submit("dup", 3)
	run("dup", "w1", true, job.Succeeded)
	if _, err := st.Retry(ctx, "dup", "test", true); err != nil {
		t.Fatal(err)
	}
	run("dup", "w2", true, job.Succeeded)
	submit("unbacked", 3)
	run("unbacked", "w1", false, job.Succeeded)
	submit("overmax", 1)
	run("overmax", "w1", true, job.Failed)
	if _, err := st.Move(ctx, "overmax", job.Failed, job.Queued, "test", "test", nil); err != nil {
		t.Fatal(err)
	}
	run("overmax", "w1", true, job.Succeeded)
	submit("killed", 3)
	run("killed", "w1", true, job.Killed)
	submit("frz", 3)
	frzTok := run("frz", "w9", true, job.Succeeded)
	// rec: its first claim is silent and recovery takes it (no
	// handler ran); it is requeued and succeeds.
	submit("rec", 3)
	if cs, err := st.Claim(ctx, job.Holder{Actor: "test", Agent: "w1"}, store.ClaimOptions{Max: 1, Lease: time.Minute}); err != nil || len(cs) != 1 || cs[0].Job().ID != "rec" {
		t.Fatalf("claim of rec: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		outs, err := st.Recover(ctx, store.RecoverOptions{Actor: "test", SilentAfter: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) == 1 && outs[0].ID == "rec" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rec's claim was not recovered: %v", outs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := st.Move(ctx, "rec", job.Stale, job.Queued, "test", "test", nil); err != nil {
		t.Fatal(err)
	}
	run("rec", "w1", true, job.Succeeded)
	submit("stuck", 3) // never claimed: still queued

	line("overlap ok other-token %s %d", okTok, time.Now().UnixNano())
	line("overlap frz other-token %s %d", frzTok, time.Now().UnixNano())
	line("end nojob never-started")
	line("garbage")
	runs := filepath.Join(t.TempDir(), "runs")
	if err := os.WriteFile(runs, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	ids := []string{"ok", "dup", "unbacked", "overmax", "killed", "frz", "stuck", "lost", "rec"}
	frozen := []freeze{{agent: "w9", from: time.Now().Add(-time.Hour), to: time.Now()}, {agent: "w1", from: time.Now().Add(time.Hour), to: time.Now().Add(2 * time.Hour)}}
	rep, err := check(ctx, st, runs, ids, frozen)
	if err != nil {
		t.Fatal(err)
	}
	want := "lost=1 duplicated=2 overlaps=1 freeze_overlaps=1 stuck=1 over_max_attempts=1 not_succeeded=1 malformed=2"
	if got := rep.counts(); got != want {
		t.Errorf("counts:\n got %s\nwant %s\nproblems:\n%s", got, want, strings.Join(rep.problems, "\n"))
	}
	if rep.zero() {
		t.Error("zero() with violations")
	}
	if rep.executions != 8 || rep.reruns != 2 || rep.recovered != 1 || rep.retried != 0 {
		t.Errorf("executions=%d reruns=%d recovered=%d retried=%d, want 8, 2, 1 and 0", rep.executions, rep.reruns, rep.recovered, rep.retried)
	}
	for _, p := range rep.problems {
		if strings.HasPrefix(p, "ok:") || strings.HasPrefix(p, "rec:") {
			t.Errorf("a clean job reported: %s", p)
		}
	}

	// Without a runs file (no handler ran yet), a queued job is stuck and
	// nothing else.
	clean, err := check(ctx, st, filepath.Join(t.TempDir(), "none"), []string{"stuck"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if clean.counts() != "lost=0 duplicated=0 overlaps=0 freeze_overlaps=0 stuck=1 over_max_attempts=0 not_succeeded=0 malformed=0" {
		t.Errorf("stuck alone: %s", clean.counts())
	}
}
