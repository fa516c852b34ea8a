package crash

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/manager"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/internal/watchdog"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// plScenario is one recorded run: setup builds the starting spool (taken
// as fully persisted, not recorded), body runs the transactions whose
// filesystem operations are recorded.
type plScenario struct {
	name  string
	setup func(e *plEnv)
	body  func(e *plEnv)
}

// plEnv runs transactions in-process and marks, in the log, what the
// client saw: a transaction begun (the states it may leave the job in) and
// a transaction returned (the state it durably left the job in).
type plEnv struct {
	t      *testing.T
	s      *job.Spool
	rec    *plRecorder
	claims map[string]*job.Claimed
}

const plAgent1, plAgent2 = "a1", "a2"

func (e *plEnv) begin(id string, states ...job.State) {
	e.rec.mark(id, false, plStates(states)...)
}

func (e *plEnv) ack(id string, states ...string) { e.rec.mark(id, true, states...) }

func plStates(sts []job.State) []string {
	out := make([]string, len(sts))
	for i, s := range sts {
		out[i] = string(s)
	}
	return out
}

// submit runs job.Submit; edit adjusts the request.
func (e *plEnv) submit(id string, edit func(*job.SubmitRequest)) {
	e.t.Helper()
	req := job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{"n":1}`), Actor: "farroctl"}
	if edit != nil {
		edit(&req)
	}
	to := job.Queued
	switch {
	case req.Held:
		to = job.Held
	case req.NotBefore.After(time.Now()):
		to = job.Deferred
	}
	e.begin(id, to)
	j, err := e.s.Submit(req)
	if err != nil {
		e.t.Fatalf("submit %s: %v", id, err)
	}
	e.ack(id, string(j.Status))
}

func (e *plEnv) claim(id, agent string) *job.Claimed {
	e.t.Helper()
	e.begin(id, job.InProgress)
	c, err := e.s.Claim(id, job.Holder{Actor: "agentd/" + agent, Agent: agent})
	if err != nil {
		e.t.Fatalf("claim %s: %v", id, err)
	}
	e.ack(id, string(job.InProgress))
	e.claims[id] = c
	return c
}

func (e *plEnv) heartbeat(id string) {
	e.t.Helper()
	if err := e.claims[id].Heartbeat(); err != nil {
		e.t.Fatalf("heartbeat %s: %v", id, err)
	}
	e.ack(id, string(job.InProgress))
}

func (e *plEnv) commit(id string, to job.State, reason string) {
	e.t.Helper()
	e.begin(id, to)
	if err := e.claims[id].Commit(to, reason, func(j *job.Job) {
		if to == job.Failed {
			code := 1
			j.ExitCode, j.Error = &code, "exit status 1"
		}
	}); err != nil {
		e.t.Fatalf("commit %s -> %s: %v", id, to, err)
	}
	e.ack(id, string(to))
}

func (e *plEnv) move(id string, from, to job.State, reason string, mutate func(*job.Job) error) {
	e.t.Helper()
	e.begin(id, to)
	if _, err := e.s.Move(id, from, to, "farroctl", reason, mutate); err != nil {
		e.t.Fatalf("move %s %s -> %s: %v", id, from, to, err)
	}
	e.ack(id, string(to))
}

// where says where job id is now: a state, plCorrupt or plGone.
func (e *plEnv) where(id string) string {
	e.t.Helper()
	locs, err := e.s.Locate(id)
	switch {
	case errors.Is(err, job.ErrNotFound):
		if m, _ := filepath.Glob(filepath.Join(e.s.Path(job.CorruptDir), id+".*")); len(m) > 0 {
			return plCorrupt
		}
		return plGone
	case err != nil:
		e.t.Fatalf("locate %s: %v", id, err)
	case len(locs) != 1:
		e.t.Fatalf("job %s in %d places", id, len(locs))
	}
	return string(locs[0].State)
}

// pass runs fn (a daemon's pass) on jobs expected to end in one of the
// given states each, and acknowledges where each ended (which must be one
// of them).
func (e *plEnv) pass(fn func(), expect map[string][]string) {
	e.t.Helper()
	for id, sts := range expect {
		e.rec.mark(id, false, sts...)
	}
	fn()
	for id, sts := range expect {
		got := e.where(id)
		if !slices.Contains(sts, got) {
			e.t.Fatalf("after the pass job %s is %s, expected one of %v", id, got, sts)
		}
		e.ack(id, got)
	}
}

func (e *plEnv) watchdogPass() func() {
	return func() {
		w := watchdog.New(spoolstore.New(e.s), watchdog.Config{}, zerolog.Nop())
		if err := w.RunOnce(context.Background()); err != nil {
			e.t.Fatalf("watchdog pass: %v", err)
		}
	}
}

// plManagerConfig is managerd's default policy with the longest backoff
// its jitter allows, so that a retried job is deferred, never due at once.
var plManagerConfig = manager.Config{Rand: func(n int64) int64 { return n - 1 }}

func (e *plEnv) managerPass(cfg manager.Config) func() {
	return func() {
		m := manager.New(spoolstore.New(e.s), cfg, zerolog.Nop())
		if err := m.RunOnce(context.Background()); err != nil {
			e.t.Fatalf("manager pass: %v", err)
		}
	}
}

// Setup helpers: they fake what a crashed process left behind.

// deadLock makes (or overwrites) id's lock as held by a process of
// another boot.
func (e *plEnv) deadLock(id, agent string) {
	e.t.Helper()
	host, _ := os.Hostname()
	o := job.Owner{
		Identity: proc.Identity{Hostname: host, PID: 1 << 22, StartTime: 1, BootID: plPreviousBoot},
		Actor:    "agentd/" + agent, Agent: agent, Token: "dead", AcquiredAt: time.Now().UTC(),
	}
	b, _ := json.Marshal(o)
	lock := e.s.LockPath(id)
	if err := os.MkdirAll(lock, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lock, fsq.OwnerFile), append(b, '\n'), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// setStatus rewrites the status in dir/job.json, as a transaction that
// died after its status write would have left it.
func (e *plEnv) setStatus(dir string, st job.State) {
	e.t.Helper()
	j, err := job.ReadJob(dir)
	if err != nil {
		e.t.Fatal(err)
	}
	j.Status = st
	if err := os.WriteFile(filepath.Join(dir, job.JobFile), j.Marshal(), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *plEnv) mustRename(src, dst string) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(src, dst); err != nil {
		e.t.Fatal(err)
	}
}

func (e *plEnv) backdate(path string) {
	e.t.Helper()
	old := time.Now().Add(-plBackdate)
	if err := os.Chtimes(path, old, old); err != nil {
		e.t.Fatal(err)
	}
}

// claimed submits and claims id in the setup.
func (e *plEnv) claimed(id, agent string) *job.Claimed {
	e.submit(id, nil)
	return e.claim(id, agent)
}

// inState brings id to st (failed, stale, held, deferred with a past
// not_before, succeeded) in the setup.
func (e *plEnv) inState(id string, st job.State) {
	e.t.Helper()
	switch st {
	case job.Held:
		e.submit(id, func(r *job.SubmitRequest) { r.Held = true })
	case job.Deferred:
		e.claimed(id, plAgent1)
		e.commit(id, job.Failed, "")
		past := time.Now().Add(-time.Minute).UTC()
		e.move(id, job.Failed, job.Deferred, "retry", func(j *job.Job) error { j.NotBefore = &past; return nil })
	default:
		e.claimed(id, plAgent1)
		e.commit(id, st, "")
	}
}

func plScenarios() []plScenario {
	var out []plScenario
	add := func(name string, setup, body func(e *plEnv)) {
		out = append(out, plScenario{name: name, setup: setup, body: body})
	}

	// submit-job
	add("submit/queued", nil, func(e *plEnv) { e.submit("A", nil) })
	add("submit/deferred", nil, func(e *plEnv) {
		e.submit("A", func(r *job.SubmitRequest) { r.NotBefore = time.Now().Add(time.Hour) })
	})
	add("submit/held", nil, func(e *plEnv) { e.submit("A", func(r *job.SubmitRequest) { r.Held = true }) })
	// A priority other than 0: the job's hint in incoming/.priority/
	// rides on the same barrier as its files.
	add("submit/priority", nil, func(e *plEnv) { e.submit("A", func(r *job.SubmitRequest) { r.Priority = 5 }) })
	add("submit/second", func(e *plEnv) { e.submit("A", nil) }, func(e *plEnv) { e.submit("B", nil) })

	// load-job (claim)
	add("claim/new-agent-dir", func(e *plEnv) { e.submit("A", nil) }, func(e *plEnv) { e.claim("A", plAgent1) })
	add("claim/agent-dir-exists", func(e *plEnv) {
		e.submit("A", nil)
		e.submit("B", nil)
		e.claim("A", plAgent1)
	}, func(e *plEnv) { e.claim("B", plAgent1) })

	// heartbeat
	add("heartbeat", func(e *plEnv) { e.claimed("A", plAgent1) }, func(e *plEnv) {
		e.heartbeat("A")
		e.heartbeat("A")
		e.heartbeat("A")
	})

	// commit-job, every target
	for _, to := range []job.State{job.Succeeded, job.Failed, job.Stale, job.Held, job.Killed, job.Queued} {
		add("commit/"+string(to), func(e *plEnv) { e.claimed("A", plAgent1) }, func(e *plEnv) {
			e.heartbeat("A")
			e.commit("A", to, "reason "+string(to))
		})
	}
	// a running job held through control.json, as farroctl hold does
	add("commit/control-hold", func(e *plEnv) { e.claimed("A", plAgent1) }, func(e *plEnv) {
		if err := e.s.RequestControl(plAgent1, "A", job.Control{Action: job.ControlHold}); err != nil {
			e.t.Fatal(err)
		}
		e.ack("A", string(job.InProgress))
		e.commit("A", job.Held, job.ReasonHeld)
	})

	// whole lifecycles, recorded from an empty spool
	add("lifecycle/succeeded", nil, func(e *plEnv) {
		e.submit("A", nil)
		e.claim("A", plAgent1)
		e.heartbeat("A")
		e.heartbeat("A")
		e.commit("A", job.Succeeded, "")
	})
	add("lifecycle/retry", nil, func(e *plEnv) {
		e.submit("A", nil)
		e.claim("A", plAgent1)
		e.commit("A", job.Failed, "")
		e.pass(e.managerPass(plManagerConfig), map[string][]string{"A": {"deferred"}})
		// Promote it as managerd does once it is due.
		e.begin("A", job.Queued)
		if _, err := e.s.Move("A", job.Deferred, job.Queued, manager.Actor, "not_before reached", nil); err != nil {
			e.t.Fatal(err)
		}
		e.ack("A", "queued")
		e.claim("A", plAgent2)
		e.commit("A", job.Succeeded, "")
	})
	add("lifecycle/interleaved", nil, func(e *plEnv) {
		e.submit("A", nil)
		e.submit("B", func(r *job.SubmitRequest) { r.Priority = 5 })
		e.claim("B", plAgent1)
		e.claim("A", plAgent2)
		e.submit("C", nil)
		e.heartbeat("B")
		e.commit("A", job.Succeeded, "")
		e.move("C", job.Queued, job.Held, job.ReasonHeld, nil)
		e.commit("B", job.Failed, "")
		e.move("C", job.Held, job.Queued, "released by operator", nil)
		e.claim("C", plAgent1)
		e.commit("C", job.Killed, job.ReasonCancelled)
	})

	// operator and managerd moves (job.Move, under the lock)
	add("move/hold", func(e *plEnv) { e.submit("A", nil) }, func(e *plEnv) {
		e.move("A", job.Queued, job.Held, job.ReasonHeld, nil)
	})
	add("move/release", func(e *plEnv) { e.inState("A", job.Held) }, func(e *plEnv) {
		e.move("A", job.Held, job.Queued, "released by operator", nil)
	})
	add("move/cancel", func(e *plEnv) { e.submit("A", nil) }, func(e *plEnv) {
		e.move("A", job.Queued, job.Killed, job.ReasonCancelled, nil)
	})
	add("move/kill", func(e *plEnv) { e.inState("A", job.Held) }, func(e *plEnv) {
		e.move("A", job.Held, job.Killed, job.ReasonKilled, nil)
	})
	add("move/requeue", func(e *plEnv) { e.inState("A", job.Failed) }, func(e *plEnv) {
		e.move("A", job.Failed, job.Queued, "requeued by operator", nil)
	})
	add("move/defer", func(e *plEnv) { e.inState("A", job.Failed) }, func(e *plEnv) {
		nb := time.Now().Add(time.Hour).UTC()
		e.move("A", job.Failed, job.Deferred, "retry", func(j *job.Job) error { j.NotBefore = &nb; return nil })
	})
	add("move/promote", func(e *plEnv) { e.inState("A", job.Deferred) }, func(e *plEnv) {
		e.move("A", job.Deferred, job.Queued, "not_before reached", nil)
	})

	// managerd's passes
	add("manager/requeue-stale", func(e *plEnv) { e.inState("A", job.Stale) }, func(e *plEnv) {
		e.pass(e.managerPass(plManagerConfig), map[string][]string{"A": {"queued"}})
	})
	add("manager/retry-and-kill-failed", func(e *plEnv) {
		e.inState("A", job.Failed)
		e.submit("B", func(r *job.SubmitRequest) { r.MaxAttempts = 1 })
		e.claim("B", plAgent1)
		e.commit("B", job.Failed, "")
	}, func(e *plEnv) {
		e.pass(e.managerPass(plManagerConfig), map[string][]string{"A": {"deferred"}, "B": {"killed"}})
	})
	add("manager/promote", func(e *plEnv) { e.inState("A", job.Deferred) }, func(e *plEnv) {
		e.pass(e.managerPass(plManagerConfig), map[string][]string{"A": {"queued"}})
	})
	add("manager/retention", func(e *plEnv) { e.inState("A", job.Succeeded) }, func(e *plEnv) {
		e.pass(e.managerPass(manager.Config{Retention: time.Nanosecond}), map[string][]string{"A": {plGone}})
	})
	add("manager/sweep-tmp", func(e *plEnv) {
		// A submit that died before its rename: its tmp/ dir, an hour old.
		d := e.s.Path(job.TmpDir, "X.0a0b")
		if err := os.MkdirAll(d, 0o755); err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, job.PromptFile), []byte("{}"), 0o644); err != nil {
			e.t.Fatal(err)
		}
		e.backdate(d)
	}, func(e *plEnv) {
		e.managerPass(plManagerConfig)()
	})

	// watchdogd's recovery of each kind of half-done transaction
	wd := func(id string, sts ...string) func(e *plEnv) {
		return func(e *plEnv) { e.pass(e.watchdogPass(), map[string][]string{id: sts}) }
	}
	add("recover/claim-lock-only", func(e *plEnv) {
		e.submit("A", nil)
		e.deadLock("A", plAgent1)
	}, wd("A", "queued"))
	add("recover/claim-before-status", func(e *plEnv) {
		e.submit("A", nil)
		e.begin("A", job.InProgress)
		e.deadLock("A", plAgent1)
		e.mustRename(e.s.JobDir(job.Queued, "", "A"), e.s.JobDir(job.InProgress, plAgent1, "A"))
	}, wd("A", "queued"))
	add("recover/dead-agent", func(e *plEnv) {
		e.claimed("A", plAgent1)
		e.deadLock("A", plAgent1)
	}, wd("A", "stale"))
	for _, to := range []job.State{job.Succeeded, job.Failed, job.Held, job.Killed, job.Queued} {
		add("recover/commit-before-rename/"+string(to), func(e *plEnv) {
			e.claimed("A", plAgent1)
			// The commit's status write is durable: job.json is the
			// truth recovery must roll forward to.
			e.setStatus(e.s.JobDir(job.InProgress, plAgent1, "A"), to)
			e.ack("A", string(to))
			e.deadLock("A", plAgent1)
		}, wd("A", string(to)))
	}
	add("recover/commit-before-unlock", func(e *plEnv) {
		e.claimed("A", plAgent1)
		e.commit("A", job.Succeeded, "")
		e.deadLock("A", plAgent1)
	}, wd("A", "succeeded"))
	add("recover/stale-before-status", func(e *plEnv) {
		e.claimed("A", plAgent1)
		e.mustRename(e.s.JobDir(job.InProgress, plAgent1, "A"), e.s.JobDir(job.Stale, "", "A"))
		e.ack("A", string(job.Stale))
		e.deadLock("A", plAgent1)
	}, wd("A", "stale"))
	add("recover/in-progress-without-lock", func(e *plEnv) {
		e.claimed("A", plAgent1)
		if err := os.RemoveAll(e.s.LockPath("A")); err != nil {
			e.t.Fatal(err)
		}
		e.backdate(e.s.JobDir(job.InProgress, plAgent1, "A"))
	}, wd("A", "stale"))
	add("recover/claim-status-without-rename", func(e *plEnv) {
		// What a file system without atomic ordering could leave: the
		// claim's status write without its rename.
		e.submit("A", nil)
		e.begin("A", job.InProgress)
		e.setStatus(e.s.JobDir(job.Queued, "", "A"), job.InProgress)
	}, wd("A", "queued"))

	// quarantine of an unreadable job, by watchdogd and by a claim
	corrupt := func(e *plEnv) {
		e.submit("A", nil)
		e.ack("A", plCorrupt)
		if err := os.WriteFile(e.s.Path(job.Queued.Dir(), "A", job.JobFile), []byte(`{"schema_version": "1.0.0", "id": "A`), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	add("quarantine/watchdog", corrupt, wd("A", plCorrupt))
	add("quarantine/claim", corrupt, func(e *plEnv) {
		e.begin("A")
		_, err := e.s.Claim("A", job.Holder{Actor: "agentd/a1", Agent: plAgent1})
		if !errors.Is(err, job.ErrCorrupt) {
			e.t.Fatalf("claim of a corrupt job: %v", err)
		}
		if got := e.where("A"); got != plCorrupt {
			e.t.Fatalf("corrupt job is %s", got)
		}
		e.ack("A", plCorrupt)
	})
	return out
}

// plRecord runs one scenario on a fresh spool and returns its log.
func plRecord(t *testing.T, sc plScenario) *plLog {
	t.Helper()
	s, err := job.Open(filepath.Join(plScratch(t), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	e := &plEnv{t: t, s: s, rec: newPLRecorder(sc.name, s.Root), claims: map[string]*job.Claimed{}}
	if sc.setup != nil {
		sc.setup(e)
	}
	if err := e.rec.start(); err != nil {
		t.Fatal(err)
	}
	defer fsq.SetRecorder(nil)
	sc.body(e)
	if err := e.rec.stop(); err != nil {
		t.Fatalf("%s: %v", sc.name, err)
	}
	return e.rec.log
}
