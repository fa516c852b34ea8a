package watchdog

// Tests of silence and of recovery around live holders: the watchdog's
// own clock, a silent holder's handler, half-done work, the startup pass.

import (
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/proc/proctest"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// A wall-clock step on the agent's host, an hour forward or back, while
// it keeps heartbeating: its heartbeats carry odd timestamps but keep
// changing, so the watchdog (which measures silence on its own clock)
// never requeues the job; an hour of the watchdog's time without a change
// does.
func TestClockStepNeitherRequeuesNorHides(t *testing.T) {
	t.Parallel()
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			t.Parallel()
			e := setup(t, Config{CrashThreshold: 3 * time.Second})
			e.claim(t, "j")
			dir := e.s.JobDir(job.InProgress, holder.Agent, "j")
			for i := range 20 {
				hb := time.Now().Add(step + time.Duration(i)*time.Millisecond).UTC()
				patch(t, dir, func(j *job.Job) { j.LastHeartbeat = &hb })
				e.runOnce(t)
				e.clock.Advance(2 * time.Second) // heartbeats every 2s of real time
			}
			if st, _ := e.where(t, "j"); st != job.InProgress || !e.locked("j") {
				t.Fatalf("a heartbeating job with a stepped clock: state %s, locked %v", st, e.locked("j"))
			}
			// The agent then freezes: its last heartbeat stays.
			e.after(t, 4*time.Second)
			if st, _ := e.where(t, "j"); st != job.Stale {
				t.Fatalf("a frozen agent with a stepped clock: state %s, want stale", st)
			}
		})
	}
}

// A silent holder's handler still runs (it has a process group of its
// own, and its frozen agent cannot stop it): the job leaves in-progress/
// only after the watchdog has killed that group and seen it gone, so the
// next attempt never overlaps this one.
func TestSilentOwnersHandlerIsStoppedBeforeRecovery(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{CrashThreshold: 3 * time.Second})
	c := e.claim(t, "j")
	id, exited := proctest.Handler(t)
	if err := c.RecordHandler(id); err != nil {
		t.Fatal(err)
	}
	e.after(t, 4*time.Second) // silent: the handler is killed, the job waits
	if st, _ := e.where(t, "j"); st != job.InProgress || !e.locked("j") {
		t.Fatalf("the job left in-progress/ (%s) while its handler could still run", st)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the silent holder's handler was not killed")
	}
	e.runOnce(t)
	if st, _ := e.where(t, "j"); st != job.Stale || e.locked("j") {
		t.Fatalf("after the handler is gone: state %s locked %v, want stale and unlocked", st, e.locked("j"))
	}
	if err := c.Heartbeat(); !job.Superseded(err) {
		t.Fatalf("the woken holder's heartbeat = %v, want superseded", err)
	}
}

// A recovery cut after its first rename leaves the job in stale/ with
// status in-progress behind its live holder's lock: the holder finds its
// job gone and stops, and the next pass past the threshold finishes the
// recovery instead of leaving it stranded until the agent exits.
func TestHalfDoneRecoveryBehindLiveOwnerIsFinished(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{CrashThreshold: 3 * time.Second})
	c := e.claim(t, "j")
	if err := fsq.Rename(c.Envelope().Runtime.Dir, e.s.JobDir(job.Stale, "", "j")); err != nil {
		t.Fatal(err)
	}
	e.after(t, 4*time.Second)
	st, j := e.where(t, "j")
	if st != job.Stale || j.Status != job.Stale || e.locked("j") {
		t.Fatalf("state %s status %s locked %v; want stale, stale, unlocked", st, j.Status, e.locked("j"))
	}
}

// The startup pass reads every job.json (seconds per 100k jobs); a holder
// that is dead meanwhile is recovered during the pass, not after it.
func TestStartupPassKeepsRecovering(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Interval: time.Millisecond})
	submitMany(t, e.s, "q", 300, false)
	e.claim(t, "dead")
	o := job.NewOwner(holder.Actor, holder.Agent)
	o.PID = deadPID(t)
	e.setOwner(t, "dead", o)
	e.runOnce(t)
	if st, _ := e.where(t, "dead"); st != job.Stale {
		t.Fatalf("state %s, want stale", st)
	}
	recovered, done := -1, -1
	for i, l := range e.log.Lines(t) {
		switch {
		case l["job_id"] == "dead" && recovered < 0:
			recovered = i
		case l["message"] == "startup reconcile done":
			done = i
		}
	}
	if recovered < 0 || done < 0 || recovered > done {
		t.Fatalf("recovery logged at line %d, startup done at line %d: want the recovery during the pass", recovered, done)
	}
}
