package ctl_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// allStates builds a spool with a job in every state (two queued: one
// of them with a prompt that is not UTF-8, kept byte for byte, and one
// with spaces, newlines and HTML characters; the running one is
// "running", held by agent t1 with its claim).
func allStates(t *testing.T) *env {
	e := newEnv(t)
	e.submit("queued1", func(r *job.SubmitRequest) { r.Prompt = []byte("{\"html\": \"<a&b>\",\n  \"n\": 1}\n"); r.Priority = 3 })
	e.submit("queued2", func(r *job.SubmitRequest) { r.Prompt = []byte("{\"s\":\"\xff\xfe\"}") })
	e.submit("deferred1", func(r *job.SubmitRequest) { r.NotBefore = time.Now().Add(time.Hour) })
	e.submit("held1", func(r *job.SubmitRequest) { r.Held = true })
	e.claim("running")
	e.claim("stale1")
	if _, err := e.s.RecoverLock("stale1", "watchdogd", "agent gone"); err != nil {
		t.Fatal(err)
	}
	e.failed("failed1")
	c := e.claim("ok1")
	if err := c.Commit(job.Succeeded, "exit 0", func(j *job.Job) { z := 0; j.ExitCode = &z }); err != nil {
		t.Fatal(err)
	}
	e.submit("killed1", nil)
	if _, err := e.s.Move("killed1", job.Queued, job.Killed, "farroctl", "cancelled", nil); err != nil {
		t.Fatal(err)
	}
	return e
}

var allIDs = []string{"queued1", "queued2", "deferred1", "held1", "running", "stale1", "failed1", "ok1", "killed1"}

// export runs farroctl export of e's spool into a file and returns it.
func (e *env) export(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "queue.jsonl")
	if err := e.ctl("").Export(ctl.ExportOptions{Output: file}); err != nil {
		t.Fatalf("export: %v\n%s", err, e.stderr)
	}
	return file
}

// importFile runs farroctl import of file into b, returning its error
// and output.
func importFile(b *backend, file string) (error, string, string) {
	c, out, errb := b.ctl("")
	err := c.Import(file)
	return err, out.String(), errb.String()
}

// Every job of the spool, in every state, is exported with its fields,
// prompt and history (and nothing of the spool's directories or locks),
// and imported as it was: the same fields (times to the microsecond),
// the same prompt bytes, the same history; the running one as stale,
// with one event more, and the operator is told.
func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	e := allStates(t)
	file := e.export(t)
	if !strings.Contains(e.stdout.String(), "exported 9 job(s) to "+file) || !strings.Contains(e.stderr.String(), "1 job(s) were running") {
		t.Errorf("export said %q %q", e.stdout, e.stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines(string(data)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if m["farro_export"] != 1.0 {
			t.Errorf("line without its format version: %s", l)
		}
		for _, k := range []string{"dir", "location", "lock", "control"} {
			if _, ok := m[k]; ok {
				t.Errorf("line carries the spool's %s: %s", k, l)
			}
		}
		if (m["id"] == "running") != (m["running"] == true) || m["id"] == "running" && (m["claim_token"] == nil || m["status"] != "in-progress") {
			t.Errorf("running mark: %s", l)
		}
	}

	b := pgBackend(t)
	err, out, stderr := importFile(b, file)
	if err != nil || !strings.Contains(out, "imported 9, already there 0, conflicts 0, refused lines 0") ||
		!strings.Contains(out, "running: was running on the spool (agent t1, attempt 1): imported as stale") {
		t.Fatalf("import: %v %q %q", err, out, stderr)
	}
	ctx := storeCtx(t)
	for _, id := range allIDs {
		loc := e.where(id)
		want, err := job.ReadJob(loc.Dir)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wantEvs, _, _ := job.ReadEvents(loc.Dir)
		gotEvs, err := b.st.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if id == "running" {
			if got.Status != job.Stale || got.Attempts != 1 || got.Agent != "t1" || got.ClaimToken != want.ClaimToken || !strings.Contains(got.Reason, "running on agent t1") {
				t.Errorf("running imported as %+v", got)
			}
			if len(gotEvs) != len(wantEvs)+1 || gotEvs[len(gotEvs)-1].From != job.InProgress || gotEvs[len(gotEvs)-1].To != job.Stale {
				t.Errorf("running's history %+v", gotEvs)
			}
			gotEvs = gotEvs[:len(wantEvs)]
		} else if g, w := string(got.Marshal()), string(micro(want).Marshal()); g != w {
			t.Errorf("%s: imported\n%s\nspool\n%s", id, g, w)
		}
		if g, w := evJSON(gotEvs), evJSON(wantEvs); g != w {
			t.Errorf("%s: history\n%s\nspool\n%s", id, g, w)
		}
		p, err := b.st.Prompt(ctx, id)
		wp, _ := job.ReadPrompt(loc.Dir)
		if err != nil || !bytes.Equal(p, wp) {
			t.Errorf("%s: prompt %q, spool %q (%v)", id, p, wp, err)
		}
	}
	counts, err := b.st.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range job.States {
		want := 1
		switch st {
		case job.Queued:
			want = 2
		case job.InProgress:
			want = 0
		case job.Stale:
			want = 2
		}
		if counts[st] != want {
			t.Errorf("%s: %d jobs in the database, want %d", st, counts[st], want)
		}
	}

	// Again: nothing changes, every job is there already.
	if err, out, stderr := importFile(b, file); err != nil || !strings.Contains(out, "imported 0, already there 9, conflicts 0") || strings.Contains(out, "was running") {
		t.Fatalf("import again: %v %q %q", err, out, stderr)
	}
}

// micro is j as the database keeps its times (UTC, microseconds).
func micro(j *job.Job) *job.Job {
	c := j.Clone()
	m := func(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
	c.CreatedAt, c.UpdatedAt = m(c.CreatedAt), m(c.UpdatedAt)
	for _, p := range []**time.Time{&c.NotBefore, &c.StartedAt, &c.LastHeartbeat, &c.FinishedAt} {
		if *p != nil {
			u := m(**p)
			*p = &u
		}
	}
	return c
}

func evJSON(evs []job.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		ev.Time = ev.Time.UTC().Truncate(time.Microsecond)
		j, _ := json.Marshal(ev)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// --state exports only those states, to stdout; a symlink where a job
// must be and a job whose prompt.json is a FIFO are reported on one line
// each and left out (never blocking), the others exported, exit 1.
func TestExportStatesAndHostile(t *testing.T) {
	t.Parallel()
	e := allStates(t)
	if err := e.ctl("").Export(ctl.ExportOptions{States: []string{"killed,held"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").Export(ctl.ExportOptions{States: []string{"running"}}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Errorf("export --state running: %v", err)
	}
	if err := e.ctl("").Export(ctl.ExportOptions{States: []string{"killed,held"}}); err != nil {
		t.Fatal(err)
	}
	ls := lines(e.stdout.String())
	if len(ls) != 2 || !strings.Contains(ls[0], `"id":"held1"`) || !strings.Contains(ls[1], `"id":"killed1"`) {
		t.Fatalf("export --state held,killed: %q", ls)
	}
	if err := os.Symlink("/etc", filepath.Join(e.s.StateDir(job.Queued), "planted")); err != nil {
		t.Fatal(err)
	}
	prompt := filepath.Join(e.where("held1").Dir, job.PromptFile)
	if err := os.Remove(prompt); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(prompt, 0o600); err != nil {
		t.Fatal(err)
	}
	// A torn last line of a history (a crash mid-append): the job is
	// exported with the readable lines, and the operator told.
	events := filepath.Join(e.where("killed1").Dir, job.EventsFile)
	f, err := os.OpenFile(events, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"time":"2026-`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = e.ctl("").Export(ctl.ExportOptions{})
	if ctl.ExitCode(err) != ctl.ExitFail || !ctl.IsSilent(err) {
		t.Fatalf("export of a spool with hostile entries: %v", err)
	}
	out := lines(e.stdout.String())
	if len(out) != 8 || !strings.Contains(out[7], `"id":"killed1"`) || !strings.Contains(out[7], `"to":"killed"`) {
		t.Errorf("exported %q", out)
	}
	errs := lines(e.stderr.String())
	if len(errs) != 4 || !strings.Contains(errs[0], "planted: not a job directory") || !strings.Contains(errs[1], "held1: ") ||
		!strings.Contains(errs[2], "killed1: 1 unreadable line(s) of events.jsonl left out of its history") {
		t.Errorf("stderr %q", errs)
	}
}

// An interrupted import (its input cut in the middle of a line) imports
// the whole lines before the cut and reports the cut one; the whole file
// imported then finishes the rest and skips what is there.
func TestImportResume(t *testing.T) {
	t.Parallel()
	e := allStates(t)
	file := e.export(t)
	data, _ := os.ReadFile(file)
	cut := bytes.Index(data, []byte(`"id":"stale1"`)) // in the middle of stale1's line
	part := filepath.Join(t.TempDir(), "part.jsonl")
	if err := os.WriteFile(part, data[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	before := bytes.Count(data[:cut], []byte("\n"))
	b := pgBackend(t)
	err, out, stderr := importFile(b, part)
	if ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(out, "imported "+itoa(before)+", already there 0") ||
		!strings.Contains(stderr, "import: line "+itoa(before+1)+": not a line of farroctl export") {
		t.Fatalf("import of a cut file: %v %q %q", err, out, stderr)
	}
	err, out, stderr = importFile(b, file)
	if err != nil || !strings.Contains(out, "imported "+itoa(9-before)+", already there "+itoa(before)+", conflicts 0, refused lines 0") {
		t.Fatalf("import of the whole file: %v %q %q", err, out, stderr)
	}
	if n, _ := b.st.Counts(storeCtx(t)); n[job.Killed] != 1 || n[job.Stale] != 2 {
		t.Errorf("counts %v", n)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A job in the database with the same ID and other content is a
// conflict, reported with its line and left as it is; the other lines
// are imported; exit 1.
func TestImportConflict(t *testing.T) {
	t.Parallel()
	e := allStates(t)
	file := e.export(t)
	b := pgBackend(t)
	if _, errs := b.st.Submit(storeCtx(t), []job.SubmitRequest{{ID: "failed1", Kind: "noop", Prompt: []byte(`{}`)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	err, out, stderr := importFile(b, file)
	if ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(out, "imported 8, already there 0, conflicts 1, refused lines 0") {
		t.Fatalf("import: %v %q %q", err, out, stderr)
	}
	if ls := lines(stderr); len(ls) != 1 || !strings.Contains(ls[0], "failed1: conflict: ") || !strings.Contains(ls[0], "line ") || !strings.Contains(ls[0], "stored: queued") {
		t.Errorf("stderr %q", stderr)
	}
	if j, _ := b.st.Get(storeCtx(t), "failed1"); j.Status != job.Queued || j.Attempts != 0 {
		t.Errorf("the conflicting job was changed: %+v", j)
	}
}

// A corrupt line, a line of another format version, a job in an
// unknown state: each is one line on stderr naming its line number, the
// rest is imported, exit 1.
func TestImportCorruptLines(t *testing.T) {
	t.Parallel()
	e := allStates(t)
	data, _ := os.ReadFile(e.export(t))
	ls := lines(string(data))
	in := []string{ls[0], `{"farro_export":1,"id":"x`, ls[1], strings.Replace(ls[2], `"farro_export":1`, `"farro_export":2`, 1),
		"", strings.Replace(ls[3], `"status":"held"`, `"status":"paused"`, 1)}
	in = append(in, ls[4:]...)
	file := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(in, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := pgBackend(t)
	err, out, stderr := importFile(b, file)
	if ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(out, "imported 7, already there 0, conflicts 0, refused lines 3") {
		t.Fatalf("import: %v %q %q", err, out, stderr)
	}
	got := lines(stderr)
	want := []string{"farroctl: import: line 2: not a line of farroctl export", "farroctl: import: line 4: export format 2, this build reads 1",
		`farroctl: import: line 6: held1: refused: unknown state "paused"`}
	if len(got) != len(want) {
		t.Fatalf("stderr %q", got)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("stderr line %q, want %q...", got[i], want[i])
		}
	}
}

// A 1 GiB line (a sparse file) is refused without being kept in memory,
// and the line after it is imported. Not parallel: it measures what the
// process allocates.
func TestImportHugeLine(t *testing.T) {
	e := allStates(t)
	data, _ := os.ReadFile(e.export(t))
	first := lines(string(data))[0]
	file := filepath.Join(t.TempDir(), "huge.jsonl")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("\n"+first+"\n"), 1<<30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b := pgBackend(t)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err, out, stderr := importFile(b, file)
	runtime.ReadMemStats(&after)
	if ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(out, "imported 1, already there 0, conflicts 0, refused lines 1") ||
		!strings.HasPrefix(stderr, "farroctl: import: line 1: longer than ") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("import: %v %q %q", err, out, stderr)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 3*ctl.MaxExportLine {
		t.Errorf("import allocated %d bytes for a 1 GiB line", grew)
	}
}

// import needs a database: on a spool it is a usage error; a directory
// is not its input.
func TestImportNeedsStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	err := e.ctl("").Import("-")
	if ctl.ExitCode(err) != ctl.ExitUsage || !strings.Contains(err.Error(), "--store postgres://") {
		t.Fatalf("import on a spool: %v", err)
	}
	b := pgBackend(t)
	dir := t.TempDir()
	if err, out, _ := importFile(b, dir); ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(err.Error(), dir+" is a directory") || out != "" {
		t.Fatalf("import of a directory: %v %q", err, out)
	}
}

// Two imports of the same file at once: each job is inserted once, the
// other import finds it there; neither reports a conflict.
func TestImportTwoAtOnce(t *testing.T) {
	t.Parallel()
	e := allStates(t)
	file := e.export(t)
	b := pgBackend(t)
	type result struct {
		err error
		out string
	}
	done := make(chan result, 2)
	for range 2 {
		go func() {
			err, out, _ := importFile(b, file)
			done <- result{err, out}
		}()
	}
	imported, same := 0, 0
	for range 2 {
		r := <-done
		var i, s, c, bad int
		if _, err := fmt.Sscanf(r.out[strings.LastIndex(r.out, "imported "):], "imported %d, already there %d, conflicts %d, refused lines %d", &i, &s, &c, &bad); err != nil || r.err != nil || c+bad != 0 {
			t.Fatalf("import: %v %q (%v)", r.err, r.out, err)
		}
		imported, same = imported+i, same+s
	}
	if imported != 9 || same != 9 {
		t.Errorf("imported %d and found %d there, want 9 and 9", imported, same)
	}
	if h, err := b.st.History(storeCtx(t), "failed1"); err != nil || len(h) != 3 {
		t.Errorf("failed1's history, imported twice at once: %+v %v", h, err)
	}
}
