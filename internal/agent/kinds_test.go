package agent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/pause"
	"github.com/farro-dev/farro/pkg/fsq/fsqtest"
	"github.com/farro-dev/farro/pkg/job"
)

// An agent with Kinds ["exec"] runs exec jobs (a real handler, /bin/true)
// and leaves the noop jobs queued, although it has the noop handler.
func TestKindsOnlyListedAreClaimed(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{Handlers: map[string]Handler{
		"noop": Noop,
		"exec": &Exec{Command: []string{"/bin/true"}},
	}, Kinds: []string{"exec"}})
	f.submit(t, "n1", "noop", 9) // higher priority: would be taken first
	f.submit(t, "e1", "exec", 0)
	f.waitState(t, "e1", job.Succeeded)
	f.stays(t, "n1", 300*time.Millisecond, false)
	if got := f.agent.Kinds(); !slices.Equal(got, []string{"exec"}) {
		t.Errorf("Kinds() = %q, want [exec]", got)
	}
}

// A kind listed without a handler, an invalid or an empty list refuse
// the agent with a *ConfigError (exit status ExitConfig); an exec
// handler left out by Kinds is not checked.
func TestKindsConfigErrors(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	builtin := map[string]Handler{"noop": Noop, "crawl.fetch": Noop, "crawl.robots": Noop}
	for _, kinds := range [][]string{{"exec"}, {"noop", "nosuch"}, {"a/b"}, {}} {
		_, err := New(Config{Spool: s, ID: "w1", Handlers: builtin, Kinds: kinds, Log: testLog(t, "w1")})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.ExitCode() != ExitConfig || ExitConfig != 152 {
			t.Errorf("Kinds %q: err %v, want a *ConfigError with exit status 2", kinds, err)
		}
	}
	missing := map[string]Handler{"noop": Noop, "exec": &Exec{Command: []string{"/nonexistent/handler"}}}
	if _, err := New(Config{Spool: s, ID: "w1", Handlers: missing, Kinds: []string{"noop"}, Log: testLog(t, "w1")}); err != nil {
		t.Errorf("an exec handler not in Kinds was checked: %v", err)
	}
	if _, err := New(Config{Spool: s, ID: "w1", Handlers: missing, Log: testLog(t, "w1")}); err == nil {
		t.Errorf("without Kinds, the unusable exec handler was accepted")
	}
}

func TestParseKinds(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"exec":                    {"exec"},
		" crawl.fetch , noop ":    {"crawl.fetch", "noop"},
		"crawl":                   {"crawl.fetch", "crawl.robots"},
		"crawl.robots,crawl,exec": {"crawl.robots", "crawl.fetch", "exec"},
	} {
		got, err := ParseKinds(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseKinds(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", ",", "exec,,noop", "../x", "crawl/fetch", "Exec", ".hidden"} {
		if got, err := ParseKinds(in); err == nil {
			t.Errorf("ParseKinds(%q) = %q, want an error", in, got)
		} else if exitCodeOf(err) != ExitConfig {
			t.Errorf("ParseKinds(%q): %v is not a configuration error", in, err)
		}
	}
}

// exitCodeOf is the exit status an error carries (0 when none).
func exitCodeOf(err error) int {
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return 0
}

// pauseKind pauses kind in f's spool as farroctl does.
func (f *fixture) pauseKind(t *testing.T, kind string) {
	t.Helper()
	if _, err := pause.Pause(f.spool.Root, pause.Entry{Kind: kind, PausedAt: time.Now(), Actor: "test", Reason: "testing"}); err != nil {
		t.Fatal(err)
	}
}

// waitPaused waits at most within for the agent to see kind paused (or
// resumed): the promise is about a second.
func (f *fixture) waitPaused(t *testing.T, kind string, paused bool, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); f.agent.isPaused(kind) != paused; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not see %s paused=%v within %s", kind, paused, within)
		}
	}
}

// Pausing noop stops a running agent from claiming noop jobs within a
// second, while it goes on claiming other kinds; resuming gives the
// parked jobs back. With inotify, and with periodic listings only.
func TestPauseKindQueueWide(t *testing.T) {
	t.Parallel()
	for _, noNotify := range []bool{false, true} {
		name := "inotify"
		if noNotify {
			name = "listing"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, Config{Handlers: map[string]Handler{"noop": Noop, "other": Noop}, NoNotify: noNotify})
			f.submit(t, "before", "noop", 0)
			f.waitState(t, "before", job.Succeeded)

			f.pauseKind(t, "noop")
			f.waitPaused(t, "noop", true, time.Second)
			f.submit(t, "n1", "noop", 5)
			f.submit(t, "n2", "noop", 5)
			f.submit(t, "o1", "other", 0)
			f.waitState(t, "o1", job.Succeeded)
			f.stays(t, "n1", 300*time.Millisecond, false)
			f.stays(t, "n2", 0, false)

			if was, err := pause.Resume(f.spool.Root, "noop"); err != nil || !was {
				t.Fatalf("Resume: %v, %v", was, err)
			}
			f.waitPaused(t, "noop", false, time.Second)
			f.waitState(t, "n1", job.Succeeded)
			f.waitState(t, "n2", job.Succeeded)
		})
	}
}

// Hostile entries in paused/ (a FIFO, a socket, a directory, a symlink
// named noop) pause nothing and never block the agent; a 1 GiB regular
// file named by a kind pauses it without being read. A paused/ that is a
// symlink is not followed.
func TestPauseHostileEntries(t *testing.T) {
	t.Parallel()
	for _, kind := range fsqtest.HostileKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := setup(t, Config{Handlers: map[string]Handler{"noop": Noop, "other": Noop}, PauseRescan: 20 * time.Millisecond})
			fsqtest.PlantHostile(t, pause.Path(f.spool.Root, "noop"), kind)
			fsqtest.PlantHostile(t, pause.Path(f.spool.Root, "other"), fsqtest.Sparse)
			f.waitPaused(t, "other", true, time.Second)
			f.submit(t, "o1", "other", 9)
			f.submit(t, "n1", "noop", 0)
			if kind == fsqtest.Sparse {
				f.waitPaused(t, "noop", true, time.Second)
				f.stays(t, "n1", 200*time.Millisecond, false)
			} else {
				f.waitState(t, "n1", job.Succeeded)
			}
			f.stays(t, "o1", 0, false)
		})
	}
	t.Run("paused-dir-symlink", func(t *testing.T) {
		t.Parallel()
		f := setup(t, Config{Handlers: map[string]Handler{"noop": Noop}, PauseRescan: 20 * time.Millisecond})
		elsewhere := t.TempDir()
		if err := os.WriteFile(filepath.Join(elsewhere, "noop"), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := pause.DirPath(f.spool.Root)
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, dir); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // several listings (PauseRescan 20ms)
		f.submit(t, "n1", "noop", 0)
		f.waitState(t, "n1", job.Succeeded)
	})
}
