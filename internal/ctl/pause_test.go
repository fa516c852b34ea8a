package ctl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/pause"
	"github.com/farro-dev/farro/pkg/fsq/fsqtest"
	"github.com/farro-dev/farro/pkg/job"
)

// pause KIND writes paused/KIND durably with who, when and why; paused
// lists it; stats and ls show it; resume removes it.
func TestPauseResumeCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("q1", nil) // noop
	e.submit("x1", func(r *job.SubmitRequest) { r.Kind = "exec" })

	if err := e.ctl("").Paused(false); err != nil || e.stdout.String() != "no kind is paused\n" {
		t.Fatalf("paused, none: %q %v", e.stdout.String(), err)
	}
	if err := e.ctl("").Pause([]string{"noop"}, "database migration"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.stdout.String(), "noop paused: agents claim none of its jobs until `farroctl resume noop`") {
		t.Errorf("pause output: %q", e.stdout.String())
	}
	got, err := pause.Read(e.s.Root, "noop")
	if err != nil || got.Reason != "database migration" || got.Actor != ctl.Actor || got.User == "" ||
		got.PID != os.Getpid() || time.Since(got.PausedAt) > time.Minute {
		t.Fatalf("paused/noop: %+v %v", got, err)
	}
	if err := e.ctl("").Pause([]string{"noop"}, "still migrating"); err != nil || !strings.Contains(e.stdout.String(), "already paused since") {
		t.Errorf("pause again: %q %v", e.stdout.String(), err)
	}

	if err := e.ctl("").Paused(false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(e.stdout.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "KIND") || !strings.HasPrefix(lines[1], "noop ") ||
		!strings.HasSuffix(lines[1], "still migrating") {
		t.Errorf("paused table:\n%s", e.stdout.String())
	}
	if err := e.ctl("").Paused(true); err != nil {
		t.Fatal(err)
	}
	var doc ctl.PausedDoc
	if err := json.Unmarshal(e.stdout.Bytes(), &doc); err != nil || len(doc.Paused) != 1 || doc.Paused[0].Kind != "noop" ||
		doc.Paused[0].Entry == nil || doc.Paused[0].Reason != "still migrating" {
		t.Errorf("paused --json: %s %v", e.stdout.String(), err)
	}

	if err := e.ctl("").Stats(false); err != nil || !strings.Contains(strings.Join(strings.Fields(e.stdout.String()), " "), "paused kinds noop (not claimed; farroctl resume KIND)") {
		t.Errorf("stats:\n%s %v", e.stdout.String(), err)
	}
	if err := e.ctl("").Stats(true); err != nil || !strings.Contains(e.stdout.String(), `"paused_kinds":["noop"]`) {
		t.Errorf("stats --json: %s %v", e.stdout.String(), err)
	}
	if err := e.ctl("").List(ctl.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(e.stdout.String(), "\n") {
		if strings.HasPrefix(l, "q1 ") != strings.Contains(l, "[kind paused]") {
			t.Errorf("ls line %q: only q1 is of a paused kind", l)
		}
	}
	if err := e.ctl("").List(ctl.ListOptions{JSON: true}); err != nil || strings.Count(e.stdout.String(), `"kind_paused":true`) != 1 {
		t.Errorf("ls --json: %s %v", e.stdout.String(), err)
	}

	if err := e.ctl("").Resume([]string{"noop"}); err != nil || e.stdout.String() != "noop resumed: agents claim its jobs again\n" {
		t.Errorf("resume: %q %v", e.stdout.String(), err)
	}
	if err := e.ctl("").Resume([]string{"noop"}); err != nil || e.stdout.String() != "noop was not paused\n" {
		t.Errorf("resume again: %q %v", e.stdout.String(), err)
	}
	if err := e.ctl("").Stats(true); err != nil || !strings.Contains(e.stdout.String(), `"paused_kinds":[]`) {
		t.Errorf("stats --json after resume: %s %v", e.stdout.String(), err)
	}
}

// Bad kinds are usage errors (exit 2) and write nothing.
func TestPauseRefusesBadKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{{}, {"noop", "exec"}, {"../x"}, {"a/b"}, {".hidden"}, {"nosuch"}} {
		err := e.ctl("").Pause(args, "")
		if ctl.ExitCode(err) != ctl.ExitUsage || strings.Contains(err.Error(), "\n") {
			t.Errorf("pause %q: %v, want a one-line usage error", args, err)
		}
	}
	if err := e.ctl("").Pause([]string{"noop"}, strings.Repeat("x", pause.MaxReasonLen+1)); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Errorf("pause with a huge reason: %v", err)
	}
	if err := e.ctl("").Resume([]string{"a/b"}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Errorf("resume a/b: %v", err)
	}
	if ks, ign, err := pause.Kinds(e.s.Root); err != nil || len(ks) != 0 || len(ign) != 0 {
		t.Errorf("paused/ after refusals: %q %v %v", ks, ign, err)
	}
	if _, err := os.Stat(filepath.Join(e.s.Root, "x")); !os.IsNotExist(err) {
		t.Errorf("pause ../x wrote outside paused/: %v", err)
	}
}

// Hostile entries in paused/ never block farroctl paused: each is named
// once on stderr, and a 1 GiB file is listed as paused but unreadable.
func TestPausedHostileEntries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := pause.Ensure(e.s.Root); err != nil {
		t.Fatal(err)
	}
	fsqtest.PlantHostile(t, pause.Path(e.s.Root, "noop"), fsqtest.FIFO)
	fsqtest.PlantHostile(t, pause.Path(e.s.Root, "exec"), fsqtest.Symlink)
	fsqtest.PlantHostile(t, pause.Path(e.s.Root, "crawl.fetch"), fsqtest.Sparse)
	done := make(chan error, 1)
	c := e.ctl("")
	go func() { done <- c.Paused(false) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("farroctl paused blocked")
	}
	if !strings.Contains(e.stdout.String(), "crawl.fetch") || !strings.Contains(e.stdout.String(), "too large") {
		t.Errorf("stdout:\n%s", e.stdout.String())
	}
	if strings.Count(e.stderr.String(), "\n") != 2 || !strings.Contains(e.stderr.String(), "paused/noop pauses nothing: not a regular file (FIFO)") {
		t.Errorf("stderr:\n%s", e.stderr.String())
	}
}
