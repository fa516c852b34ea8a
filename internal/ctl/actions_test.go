package ctl_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

func TestActionsOnNonRunningJobs(t *testing.T) {
	e := newEnv(t)
	e.submit("q1", nil)
	e.submit("q2", nil)
	e.submit("d1", func(r *job.SubmitRequest) { r.NotBefore = time.Now().Add(time.Hour) })
	e.submit("d2", func(r *job.SubmitRequest) { r.NotBefore = time.Now().Add(time.Hour) })
	e.submit("h1", func(r *job.SubmitRequest) { r.Held = true })
	e.failed("f1")
	e.failed("f2")
	// A stale job: its agent died (recovered through the lock).
	e.claim("s1")
	if _, err := e.s.RecoverLock("s1", "watchdogd", "owner dead"); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		a      ctl.Action
		id     string
		to     job.State
		reason string
	}{
		{ctl.Hold, "q1", job.Held, job.ReasonHeld},
		{ctl.Hold, "d1", job.Held, job.ReasonHeld},
		{ctl.Release, "q1", job.Queued, "released by operator"},
		{ctl.Release, "h1", job.Queued, "released by operator"},
		{ctl.Cancel, "d1", job.Killed, job.ReasonCancelled},
		{ctl.Kill, "q2", job.Killed, job.ReasonKilled},
		{ctl.Requeue, "f1", job.Queued, "requeued by operator"},
		{ctl.Requeue, "s1", job.Queued, "requeued by operator"},
		{ctl.Requeue, "d2", job.Queued, "requeued by operator"},
		{ctl.Cancel, "f2", job.Killed, job.ReasonCancelled},
	}
	for _, st := range steps {
		if err := e.ctl("").Act(st.a, []string{st.id}, ctl.ActOptions{}); err != nil {
			t.Fatalf("%s %s: %v (stderr %q)", st.a, st.id, err, e.stderr)
		}
		if out := e.stdout.String(); !strings.HasPrefix(out, st.id+": ") || strings.Count(out, "\n") != 1 {
			t.Errorf("%s %s: stdout %q", st.a, st.id, out)
		}
		j := e.read(st.id)
		if j.Status != st.to || j.Reason != st.reason {
			t.Errorf("%s %s: %s %q, want %s %q", st.a, st.id, j.Status, j.Reason, st.to, st.reason)
		}
		if j.NotBefore != nil {
			t.Errorf("%s %s: not_before kept: %v", st.a, st.id, j.NotBefore)
		}
		if _, err := fsq.ReadOwner(e.s.LockPath(st.id)); err == nil {
			t.Errorf("%s %s: lock left behind", st.a, st.id)
		}
	}
	if j := e.read("f1"); j.Attempts != 1 {
		t.Errorf("requeue changed attempts: %d", j.Attempts)
	}
}

func TestActionsRefuseAndContinue(t *testing.T) {
	e := newEnv(t)
	e.submit("q", nil)
	e.submit("h", func(r *job.SubmitRequest) { r.Held = true })
	c := e.claim("done")
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	e.failed("f")
	e.claim("run")

	// Each ID is processed independently; one line per ID. (An unsafe
	// ID is a usage error refusing the whole command:
	// TestActUnsafeIDIsUsageError.)
	err := e.ctl("").Act(ctl.Hold, []string{"q", "done", "nope", "h", "f"}, ctl.ActOptions{})
	if ctl.ExitCode(err) != ctl.ExitFail || !ctl.IsSilent(err) {
		t.Fatalf("err %v", err)
	}
	out, errs := lines(e.stdout.String()), lines(e.stderr.String())
	if len(out) != 2 || !strings.HasPrefix(out[0], "q: ") || out[1] != "h: already held" {
		t.Errorf("stdout %q", out)
	}
	if len(errs) != 3 || !strings.HasPrefix(errs[0], "farroctl: done: ") || !strings.Contains(errs[0], "terminal") ||
		!strings.Contains(errs[1], "not found") || !strings.Contains(errs[2], "is failed") {
		t.Errorf("stderr %q", errs)
	}
	if e.read("q").Status != job.Held || e.read("done").Status != job.Succeeded {
		t.Error("wrong moves")
	}

	for _, tc := range []struct {
		a    ctl.Action
		id   string
		want string
	}{
		{ctl.Release, "f", "applies only to held"},
		{ctl.Requeue, "q", "use release"}, // q is held now
		{ctl.Release, "run", "is running"},
		{ctl.Requeue, "run", "is running"},
		{ctl.Kill, "done", "terminal"},
	} {
		err := e.ctl("").Act(tc.a, []string{tc.id}, ctl.ActOptions{})
		if ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(e.stderr.String(), tc.want) {
			t.Errorf("%s %s: %v, stderr %q", tc.a, tc.id, err, e.stderr)
		}
	}
	if err := e.ctl("").Act(ctl.Hold, nil, ctl.ActOptions{}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Errorf("no ids: %v", err)
	}
	if err := e.ctl("").Act(ctl.Hold, []string{"q", "--reason"}, ctl.ActOptions{}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Errorf("flag after ids: %v", err)
	}
}

func TestActionNote(t *testing.T) {
	e := newEnv(t)
	e.submit("q", nil)
	if err := e.ctl("").Act(ctl.Cancel, []string{"q"}, ctl.ActOptions{Note: "duplicate of p"}); err != nil {
		t.Fatal(err)
	}
	if j := e.read("q"); j.Reason != "cancelled: duplicate of p" {
		t.Fatalf("reason %q", j.Reason)
	}
}

func TestActionsOnRunningJobWriteControl(t *testing.T) {
	e := newEnv(t)
	c := e.claim("run")
	dir := e.where("run").Dir
	for _, tc := range []struct {
		a      ctl.Action
		action string
		to     job.State
		reason string
	}{
		{ctl.Hold, job.ControlHold, job.Held, job.ReasonHeld},
		{ctl.Cancel, job.ControlCancel, job.Killed, job.ReasonCancelled},
		{ctl.Kill, job.ControlKill, job.Killed, job.ReasonKilled},
	} {
		before := time.Now().UTC().Add(-time.Second)
		if err := e.ctl("").Act(tc.a, []string{"run"}, ctl.ActOptions{}); err != nil {
			t.Fatalf("%s: %v (%s)", tc.a, err, e.stderr)
		}
		if !strings.Contains(e.stdout.String(), "requested") {
			t.Errorf("%s: stdout %q", tc.a, e.stdout)
		}
		ctrl, err := job.ReadControl(dir)
		if err != nil || ctrl == nil {
			t.Fatalf("%s: control %v, %v", tc.a, ctrl, err)
		}
		if ctrl.Action != tc.action || ctrl.Actor != ctl.Actor || ctrl.RequestedAt.Before(before) {
			t.Errorf("%s: control %+v", tc.a, ctrl)
		}
		if to, reason, ok := ctrl.Target(); !ok || to != tc.to || reason != tc.reason {
			t.Errorf("%s: target %s %q", tc.a, to, reason)
		}
		// The job itself is untouched: still running, job.json unchanged.
		if j := e.read("run"); j.Status != job.InProgress {
			t.Errorf("%s: status %s", tc.a, j.Status)
		}
	}
	// The agent honours the request: it commits and the file goes with
	// the job (the agent removes it).
	if err := c.Commit(job.Killed, job.ReasonKilled, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").Act(ctl.Cancel, []string{"run"}, ctl.ActOptions{}); err != nil || !strings.Contains(e.stdout.String(), "already killed") {
		t.Fatalf("after commit: %v %q %q", err, e.stdout, e.stderr)
	}
}

func TestControlFile(t *testing.T) {
	e := newEnv(t)
	e.claim("run")
	dir := e.where("run").Dir
	if c, err := job.ReadControl(dir); c != nil || err != nil {
		t.Fatalf("absent: %v %v", c, err)
	}
	if err := e.s.RequestControl("t1", "run", job.Control{Action: "pause"}); err == nil {
		t.Error("unknown action accepted")
	}
	if err := e.s.RequestControl("t2", "run", job.Control{Action: job.ControlHold}); err == nil || !strings.Contains(err.Error(), fsq.ErrVanished.Error()) {
		t.Errorf("wrong agent: %v", err)
	}
	if err := e.s.RequestControl("t1", "../run", job.Control{Action: job.ControlHold}); err == nil {
		t.Error("unsafe id accepted")
	}
	if err := e.s.RequestControl("t1", "run", job.Control{Action: job.ControlCancel, Reason: "why not"}); err != nil {
		t.Fatal(err)
	}
	c, err := job.ReadControl(dir)
	if err != nil || c.Actor != "farroctl" || c.RequestedAt.IsZero() {
		t.Fatalf("%+v %v", c, err)
	}
	if _, reason, _ := c.Target(); reason != "cancelled: why not" {
		t.Errorf("reason %q", reason)
	}
	// A job its agent is committing (status already rewritten, rename
	// pending) gets no request: it would travel with the job.
	e.claim("ending")
	edir := e.where("ending").Dir
	b, _ := os.ReadFile(edir + "/" + job.JobFile)
	writeFile(t, edir+"/"+job.JobFile, strings.Replace(string(b), `"status": "in-progress"`, `"status": "succeeded"`, 1))
	if err := e.s.RequestControl("t1", "ending", job.Control{Action: job.ControlKill}); !errors.Is(err, fsq.ErrVanished) {
		t.Errorf("finishing job: %v", err)
	}
	if c, _ := job.ReadControl(edir); c != nil {
		t.Error("control written to a finishing job")
	}
	writeFile(t, dir+"/"+job.ControlFile, `{"action":"explode"}`)
	if _, err := job.ReadControl(dir); err == nil {
		t.Error("unknown action read")
	}
}

func TestActWaitsForABusyLock(t *testing.T) {
	e := newEnv(t)
	e.submit("q", nil)
	lock := e.s.LockPath("q")
	if err := fsq.TryLock(lock, []byte(`{"pid":1}`)); err != nil {
		t.Fatal(err)
	}
	// Busy for good: the action gives up with a reason.
	err := e.ctl("").Act(ctl.Hold, []string{"q"}, ctl.ActOptions{Retries: 3, Backoff: time.Millisecond})
	if ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(e.stderr.String(), "busy") {
		t.Fatalf("%v %q", err, e.stderr)
	}
	if e.read("q").Status != job.Queued {
		t.Fatal("moved under someone else's lock")
	}
	// Busy for a moment: the action retries and succeeds.
	go func() {
		time.Sleep(60 * time.Millisecond)
		_ = fsq.Unlock(lock)
	}()
	if err := e.ctl("").Act(ctl.Hold, []string{"q"}, ctl.ActOptions{}); err != nil {
		t.Fatalf("%v %q", err, e.stderr)
	}
	if e.read("q").Status != job.Held {
		t.Fatal("not held")
	}
}

func TestActFollowsAJobClaimedMeanwhile(t *testing.T) {
	e := newEnv(t)
	e.submit("q", nil)
	// An agent is claiming the job right now: it holds the lock and the
	// job is about to be running.
	lock := e.s.LockPath("q")
	if err := fsq.TryLock(lock, []byte(`{"pid":1}`)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		time.Sleep(60 * time.Millisecond)
		_ = fsq.Unlock(lock)
		_, err := e.s.Claim("q", holder)
		done <- err
	}()
	// Claim may race with farroctl's own Move after the unlock; either the
	// job is held before the claim (claim fails) or it runs and gets a
	// control file.
	err := e.ctl("").Act(ctl.Cancel, []string{"q"}, ctl.ActOptions{})
	cerr := <-done
	if err != nil {
		t.Fatalf("%v %q", err, e.stderr)
	}
	loc := e.where("q")
	switch {
	case cerr == nil:
		if loc.State == job.InProgress {
			if c, _ := job.ReadControl(loc.Dir); c == nil || c.Action != job.ControlCancel {
				t.Fatalf("running without a control file: %q", e.stdout)
			}
		} else if loc.State != job.Killed {
			t.Fatalf("claimed job in %s", loc.State)
		}
	case loc.State != job.Killed:
		t.Fatalf("claim failed (%v) but the job is %s", cerr, loc.State)
	}
}

// farroctl hold --wait on a running job whose attempt fails just as the
// request lands (the agent never saw it): the request names that attempt,
// so it is applied all the same, and farroctl reports the real outcome.
func TestActWaitAppliesARequestThatLostTheRace(t *testing.T) {
	for _, tc := range []struct {
		action ctl.Action
		commit job.State
		want   job.State
		err    string
	}{
		{ctl.Hold, job.Failed, job.Held, ""},
		{ctl.Cancel, job.Failed, job.Killed, ""},
		{ctl.Cancel, job.Stale, job.Killed, ""},
		{ctl.Hold, job.Succeeded, job.Succeeded, "finished as succeeded before the hold request took effect"},
	} {
		t.Run(string(tc.action)+"-vs-"+string(tc.commit), func(t *testing.T) {
			e := newEnv(t)
			c := e.claim("run")
			done := make(chan error, 1)
			go func() {
				done <- e.ctl("").Act(tc.action, []string{"run"}, ctl.ActOptions{Wait: 10 * time.Second})
			}()
			// The agent commits its outcome once the request is there,
			// without looking at it.
			deadline := time.Now().Add(10 * time.Second)
			for {
				if p, _ := c.PendingControl(); p != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no control request written")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := c.Commit(tc.commit, "", nil); err != nil {
				t.Fatal(err)
			}
			err := <-done
			if loc := e.where("run"); loc.State != tc.want {
				t.Fatalf("job in %s, want %s (act: %v; %s)", loc.State, tc.want, err, e.stdout)
			}
			if tc.err == "" && err != nil {
				t.Fatalf("act: %v\n%s", err, e.stderr)
			}
			if tc.err != "" && !strings.Contains(e.stderr.String(), tc.err) {
				t.Fatalf("stderr %q, want %q", e.stderr, tc.err)
			}
		})
	}
}
