package ctl_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// streamLines reads the spool's stream through `farroctl events --json`.
func (e *env) streamLines(o ctl.EventsOptions) []job.StreamLine {
	e.t.Helper()
	o.JSON = true
	if err := e.ctl("").Events(o); err != nil {
		e.t.Fatalf("events: %v (%s)", err, e.stderr)
	}
	var out []job.StreamLine
	sc := bufio.NewScanner(strings.NewReader(e.stdout.String()))
	for sc.Scan() {
		var l job.StreamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			e.t.Fatalf("events --json printed %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// operatorLines are the audit lines of the stream, by command.
func (e *env) operatorLines() map[string][]job.StreamLine {
	e.t.Helper()
	out := map[string][]job.StreamLine{}
	for _, l := range e.streamLines(ctl.EventsOptions{}) {
		if l.Event.Type == job.StreamOperator {
			out[l.Event.Command] = append(out[l.Event.Command], l)
		}
	}
	return out
}

// Each farroctl action appends one audit line: actor farroctl, the OS
// user, the command, its jobs and the operator's reason.
func TestActionsAreAudited(t *testing.T) {
	e := newEnv(t)
	if err := e.ctl(`{"n":1}`).Submit(ctl.SubmitOptions{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	batch := `{"id":"b1","prompt":{}}` + "\n" + `{"id":"b2","prompt":{}}` + "\n" + `{"id":"b3","prompt":{}}` + "\n" + `{"id":"a","prompt":{}}` + "\n"
	if err := e.ctl(batch).Submit(ctl.SubmitOptions{Batch: true}); ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("batch with a duplicate: %v", err)
	}
	steps := []struct {
		a    ctl.Action
		ids  []string
		note string
	}{
		{ctl.Hold, []string{"a", "b1"}, "disk full on the target"},
		{ctl.Release, []string{"a"}, ""},
		{ctl.Cancel, []string{"b1"}, "duplicate of a"},
		{ctl.Kill, []string{"b2"}, ""},
		{ctl.Retry, []string{"b2"}, ""},
		{ctl.Cancel, []string{"b2"}, ""},
		{ctl.Remove, []string{"b2"}, ""},
	}
	for _, st := range steps {
		if err := e.ctl("").Act(st.a, st.ids, ctl.ActOptions{Note: st.note}); err != nil {
			t.Fatalf("%s %v: %v (%s)", st.a, st.ids, err, e.stderr)
		}
	}
	e.failed("f")
	if err := e.ctl("").Act(ctl.Requeue, []string{"f", "nosuch"}, ctl.ActOptions{}); ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("requeue of a missing job: %v", err)
	}

	ops := e.operatorLines()
	me, _ := user.Current()
	check := func(cmd string, ids string, count, failed int, reason string) {
		t.Helper()
		ls := ops[cmd]
		if len(ls) == 0 {
			t.Fatalf("no audit line for %s; have %v", cmd, ops)
		}
		l := ls[0]
		ops[cmd] = ls[1:]
		if l.Actor != "farroctl" || l.UID == nil || *l.UID != os.Getuid() || me != nil && l.User != me.Username {
			t.Errorf("%s: actor %q user %q uid %v", cmd, l.Actor, l.User, l.UID)
		}
		if got := strings.Join(l.JobIDs, " "); got != ids || l.Count != count || l.Failed != failed || l.Reason != reason {
			t.Errorf("%s: ids %q count %d failed %d reason %q; want %q %d %d %q", cmd, got, l.Count, l.Failed, l.Reason, ids, count, failed, reason)
		}
		if l.Timestamp == "" || l.App != "farro" || l.Level != "info" {
			t.Errorf("%s: line %+v", cmd, l)
		}
	}
	check("submit", "a", 1, 0, "")
	check("submit --batch", "b1 b2 b3", 3, 1, "")
	check("hold", "a b1", 2, 0, "disk full on the target")
	check("release", "a", 1, 0, "")
	check("cancel", "b1", 1, 0, "duplicate of a")
	check("kill", "b2", 1, 0, "")
	check("retry", "b2", 1, 0, "")
	check("cancel", "b2", 1, 0, "")
	check("rm", "b2", 1, 0, "")
	check("requeue", "f nosuch", 2, 1, "")
	for cmd, rest := range ops {
		if len(rest) > 0 {
			t.Errorf("%s: %d audit lines more than actions", cmd, len(rest))
		}
	}
}

func TestFsckRepairIsAudited(t *testing.T) {
	e := broken(t)
	_ = e.ctl("").Fsck(ctl.FsckOptions{Repair: true, Grace: ctl.DefaultGrace})
	ls := e.operatorLines()["fsck --repair"]
	if len(ls) != 1 || ls[0].Count != 9 || ls[0].Failed != 2 {
		t.Fatalf("fsck --repair audit lines: %+v", ls)
	}
	// fsck without --repair changes nothing and writes nothing.
	_ = e.ctl("").Fsck(ctl.FsckOptions{Grace: ctl.DefaultGrace})
	if n := len(e.operatorLines()["fsck --repair"]); n != 1 {
		t.Fatalf("%d fsck audit lines after a plain fsck", n)
	}
}

// --job keeps one job's lines (its transitions and the actions naming it),
// in order; the table shows one line per event.
func TestEventsJob(t *testing.T) {
	e := newEnv(t)
	c := e.claim("x")
	if err := c.Commit(job.Failed, "exit 3", nil); err != nil {
		t.Fatal(err)
	}
	e.submit("other", nil)
	if err := e.ctl("").Act(ctl.Requeue, []string{"x"}, ctl.ActOptions{Note: "fixed the input"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range e.streamLines(ctl.EventsOptions{Job: "x"}) {
		got = append(got, l.Event.Type+" "+l.Event.From+">"+l.Event.To+l.Event.Command)
	}
	want := "state_transition >queued|state_transition queued>in-progress|state_transition in-progress>failed|state_transition failed>queued|operator >requeue"
	if strings.Join(got, "|") != want {
		t.Fatalf("events --job x:\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	if err := e.ctl("").Events(ctl.EventsOptions{Job: "x"}); err != nil {
		t.Fatal(err)
	}
	table := strings.Split(strings.TrimSpace(e.stdout.String()), "\n")
	if len(table) != 5 || !strings.Contains(table[2], "x  in-progress -> failed  attempt 1  exit 3") ||
		!strings.Contains(table[4], "requeue by ") || !strings.Contains(table[4], "fixed the input") || strings.Contains(e.stdout.String(), "other") {
		t.Fatalf("table:\n%s", e.stdout)
	}
	if err := e.ctl("").Events(ctl.EventsOptions{Job: "../x"}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Fatalf("unsafe --job: %v", err)
	}
}

// A torn or foreign line is skipped and counted; --since drops old lines.
func TestEventsSkipsBadLinesAndSince(t *testing.T) {
	e := newEnv(t)
	e.submit("new", nil)
	old := time.Now().UTC().Add(-5 * time.Hour)
	seg := e.s.Path(job.StreamDir, job.StreamSegment(old))
	oldLine := `{"timestamp":"` + old.Format(job.StreamTimeLayout) + `","level":"info","app":"farro","actor":"farroctl","job_id":"old","event":{"type":"state_transition","to":"queued"},"message":"m"}`
	if err := os.WriteFile(seg, []byte(oldLine+"\nnot json\n"+strings.Repeat("z", 10000)+"\n{\"torn\":"), 0o644); err != nil {
		t.Fatal(err)
	}
	all := e.streamLines(ctl.EventsOptions{})
	if len(all) != 2 || all[0].JobID != "old" || all[1].JobID != "new" {
		t.Fatalf("lines %+v", all)
	}
	if !strings.Contains(e.stderr.String(), "3 unreadable line(s)") {
		t.Fatalf("stderr %q", e.stderr)
	}
	if ls := e.streamLines(ctl.EventsOptions{Since: time.Hour}); len(ls) != 1 || ls[0].JobID != "new" {
		t.Fatalf("--since 1h: %+v", ls)
	}
}

// syncBuffer is a writer --follow can write to while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// --follow prints lines appended while it runs, from new segments too
// (the next hour's), each once, and returns when its context ends.
func TestEventsFollow(t *testing.T) {
	e := newEnv(t)
	e.submit("before", nil)
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := &ctl.Ctl{Root: e.s.Root, Stdout: out, Stderr: out}
	go func() {
		done <- c.Events(ctl.EventsOptions{Follow: true, JSON: true, Poll: 10 * time.Millisecond, Context: ctx})
	}()
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(out.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("--follow did not print %s:\n%s", what, out)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(`"job_id":"before"`)
	for i := 0; i < 5; i++ {
		e.submit("during"+strconv.Itoa(i), nil)
	}
	waitFor(`"job_id":"during4"`)
	// A segment of a later hour appears (another writer's clock turned).
	next := time.Now().UTC().Add(time.Hour)
	line := `{"timestamp":"` + next.Format(job.StreamTimeLayout) + `","level":"info","app":"farro","actor":"agentd/w9","job_id":"nexthour","event":{"type":"state_transition","from":"queued","to":"in-progress"},"message":"m"}`
	seg := e.s.Path(job.StreamDir, job.StreamSegment(next))
	// Written in two parts: a half line is not printed until it is whole.
	if err := os.WriteFile(seg, []byte(line[:40]), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let a few polls see the half line
	if strings.Contains(out.String(), "nexthour") {
		t.Fatal("a half-written line was printed")
	}
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line[40:] + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitFor(`"job_id":"nexthour"`)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("--follow did not stop with its context")
	}
	text := out.String()
	for _, id := range []string{"before", "during0", "during4", "nexthour"} {
		if n := strings.Count(text, `"job_id":"`+id+`"`); n != 1 {
			t.Fatalf("%s printed %d times:\n%s", id, n, text)
		}
	}
}
