package source_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
)

func spool(t *testing.T) *job.Spool {
	t.Helper()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNames(t *testing.T) {
	for _, n := range []string{"a", "news-1", "A_b", strings.Repeat("x", 60)} {
		if err := source.ValidateName(n); err != nil {
			t.Errorf("%q refused: %v", n, err)
		}
	}
	for _, n := range []string{"", ".hidden", "..", "../x", "a/b", "a.b", "-x", "x.lock", strings.Repeat("x", 61), "a b", "é"} {
		if err := source.ValidateName(n); err == nil {
			t.Errorf("%q accepted", n)
		}
	}
	if got := source.NameFromURL("https://www.Example.com/news/?a=1"); got != "www-Example-com-news-a-1" {
		t.Errorf("NameFromURL: %q", got)
	}
}

func TestCreateLoadRemove(t *testing.T) {
	sp := spool(t)
	now := time.Now().UTC()
	s := source.New("news", "HTTP://Example.COM:80/a/../news")
	if err := source.Create(sp, s, now); err != nil {
		t.Fatal(err)
	}
	if err := source.Create(sp, source.New("news", "http://other/"), now); !errors.Is(err, source.ErrExists) {
		t.Errorf("second create: %v", err)
	}
	got, err := source.Load(sp, "news")
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != "http://example.com/news" || got.Domain != "example.com" || got.Crawl != "src-news" || !got.Due(now) {
		t.Errorf("loaded %+v", got)
	}
	// No temp files left beside it.
	ents, _ := os.ReadDir(sp.Path(source.Dir))
	for _, e := range ents {
		if e.Name() != "news.json" && e.Name() != "news.lock" {
			t.Errorf("stray file %s", e.Name())
		}
	}
	if err := source.Remove(sp, "news"); err != nil {
		t.Fatal(err)
	}
	if _, err := source.Load(sp, "news"); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("after rm: %v", err)
	}
	if err := source.Remove(sp, "news"); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("second rm: %v", err)
	}
}

// TestHostileFiles: whatever is in sources/, listing reports problems and
// keeps going, loading gives a clear error, nothing panics.
func TestHostileFiles(t *testing.T) {
	sp := spool(t)
	if err := source.Create(sp, source.New("good", "http://example.com/"), time.Now()); err != nil {
		t.Fatal(err)
	}
	dir := sp.Path(source.Dir)
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("broken.json", "{not json")
	write("empty.json", "")
	write("wrongname.json", `{"schema_version":"1","name":"other","url":"http://a/","every":"1h"}`)
	write("future.json", `{"schema_version":"9","name":"future","url":"http://a/"}`)
	write("badurl.json", `{"schema_version":"1","name":"badurl","url":"ftp://a/","every":"1h","backoff_base":"1h","backoff_max":"2h","scope":"host","user_agent":"x","timeout":"1s"}`)
	write("neg.json", `{"schema_version":"1","name":"neg","url":"http://a/","every":"-1h","backoff_base":"1h","backoff_max":"2h","scope":"host","user_agent":"x","timeout":"1s"}`)
	write("bad name.json", "{}")
	write(".hidden.json", "{}")
	write("README", "hello")
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	srcs, probs, err := source.List(sp)
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 1 || srcs[0].Name != "good" {
		t.Errorf("sources: %v", srcs)
	}
	if len(probs) != 10 {
		t.Errorf("%d problems, want 10: %+v", len(probs), probs)
	}
	for _, p := range probs {
		if p.Error == "" || p.File == "" {
			t.Errorf("problem without detail: %+v", p)
		}
	}
	for _, n := range []string{"broken", "empty", "wrongname", "future", "badurl", "neg", "link", "dir"} {
		if _, err := source.Load(sp, n); err == nil || errors.Is(err, source.ErrNotFound) {
			t.Errorf("load %s: %v", n, err)
		}
	}
	// Updates of a broken source fail and leave the file alone.
	if _, err := source.Update(sp, "broken", time.Now(), func(*source.Source) error { return nil }); err == nil {
		t.Error("update of a broken source succeeded")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "broken.json")); string(b) != "{not json" {
		t.Errorf("broken file rewritten: %q", b)
	}
}

func TestBackoffAndJitter(t *testing.T) {
	s := source.New("x", "http://a/")
	s.Every, s.BackoffBase, s.BackoffMax, s.Jitter = crawl.Duration(24*time.Hour), crawl.Duration(6*time.Hour), crawl.Duration(7*24*time.Hour), crawl.Duration(time.Hour)
	for n, want := range map[int]time.Duration{1: 6 * time.Hour, 2: 12 * time.Hour, 3: 24 * time.Hour, 5: 96 * time.Hour, 6: 168 * time.Hour, 60: 168 * time.Hour} {
		if got := s.Backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
	if b := s.JitterBound(); b != time.Hour {
		t.Errorf("bound %s", b)
	}
	s.Every = crawl.Duration(time.Hour) // a quarter of it caps the jitter
	if b := s.JitterBound(); b != 15*time.Minute {
		t.Errorf("bound %s, want 15m", b)
	}
	now := time.Now()
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for i := 0; i < 2000; i++ {
		d := s.NextCheck(now, rand.Int64N).Sub(now) - time.Hour
		lo, hi = min(lo, d), max(hi, d)
		if d < 0 || d >= 15*time.Minute {
			t.Fatalf("jitter %s outside [0, 15m)", d)
		}
	}
	if hi-lo < 10*time.Minute {
		t.Errorf("jitter spread only %s..%s: not random?", lo, hi)
	}
	s.ConsecutiveFailures = 2
	if d := s.NextCheck(now, func(int64) int64 { return 0 }).Sub(now); d != 12*time.Hour {
		t.Errorf("after 2 failures: %s", d)
	}
}
