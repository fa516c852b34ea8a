package logx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

func TestJournalWriterPrefixesPriority(t *testing.T) {
	var buf bytes.Buffer
	l := zerolog.New(JournalWriter{W: &buf}).Level(zerolog.DebugLevel)
	l.Debug().Msg("d")
	l.Info().Msg("i")
	l.Warn().Msg("w")
	l.Error().Msg("e")
	l.Log().Msg("n")
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := []string{"<7>", "<6>", "<4>", "<3>", "<6>"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, want[i]) {
			t.Errorf("line %d = %q, want prefix %s", i, line, want[i])
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line[3:]), &m); err != nil {
			t.Errorf("line %d after the prefix is not JSON: %v", i, err)
		}
	}
}

func TestPriorityLevels(t *testing.T) {
	cases := map[zerolog.Level]int{
		zerolog.PanicLevel: 0, zerolog.FatalLevel: 2, zerolog.ErrorLevel: 3, zerolog.WarnLevel: 4,
		zerolog.InfoLevel: 6, zerolog.NoLevel: 6, zerolog.DebugLevel: 7, zerolog.TraceLevel: 7,
	}
	for l, p := range cases {
		if got := Priority(l); got != p {
			t.Errorf("Priority(%v) = %d, want %d", l, got, p)
		}
	}
}

// TestNewDetectsJournalStream plays systemd: JOURNAL_STREAM names the
// device and inode of the logger's output file, so lines get the prefix;
// another file, or no JOURNAL_STREAM, gets bare JSON lines.
func TestNewDetectsJournalStream(t *testing.T) {
	dir := t.TempDir()
	journal, err := os.Create(filepath.Join(dir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer journal.Close()
	other, err := os.Create(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(journal.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))

	lj, lo := New(journal, "test", "info"), New(other, "test", "info")
	lj.Warn().Msg("to the journal")
	lo.Warn().Msg("elsewhere")
	got, _ := os.ReadFile(journal.Name())
	if !strings.HasPrefix(string(got), `<4>{"level":"warn"`) {
		t.Errorf("journal stream line = %q, want a <4> prefix", got)
	}
	got, _ = os.ReadFile(other.Name())
	if !strings.HasPrefix(string(got), `{"level":"warn"`) {
		t.Errorf("other file line = %q, want no prefix", got)
	}

	for _, env := range []string{"", "garbage", "1:x", fmt.Sprintf("%d:%d", st.Dev, st.Ino+1)} {
		if streamMatches(env, journal) {
			t.Errorf("JOURNAL_STREAM=%q matched", env)
		}
	}
}
