package crawlwarc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

func art(u string) *crawl.Artifact {
	return &crawl.Artifact{Crawl: "k", NormalizedURL: u, FinalURL: u, Outcome: crawl.OutcomeNetworkError, FetchedAt: time.Now()}
}

// Until Close, nothing is under a final name: an export that dies (Abort
// here, SIGKILL leaves the staging directory) leaves no torn .warc.gz; and
// Close never replaces a file already there.
func TestStagedAndNeverReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := Create(dir, Options{Crawl: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(art("http://a.test/"), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz")); len(got) != 0 {
		t.Fatalf("visible before Close: %v", got)
	}
	w.Abort()
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("Abort left %v", es)
	}

	w, _ = Create(dir, Options{Crawl: "k"})
	w.Add(art("http://a.test/"), nil)
	files, err := w.Close()
	if err != nil || len(files) != 1 || w.Records != 1 {
		t.Fatalf("Close: %v %v (%d records)", files, err, w.Records)
	}
	// A second export whose file name collides (same crawl, same second).
	if err := os.Rename(files[0], files[0]+".keep"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(files[0], []byte("precious"), 0o644)
	w, _ = Create(dir, Options{Crawl: "k"})
	w.Add(art("http://b.test/"), nil)
	// Names carry the export's second: give the staged file the existing
	// one's name to force the collision.
	w.w.Close()
	names, _ := os.ReadDir(w.stage)
	if len(names) != 1 {
		t.Fatalf("staged: %v", names)
	}
	if err := os.Rename(filepath.Join(w.stage, names[0].Name()), filepath.Join(w.stage, filepath.Base(files[0]))); err != nil {
		t.Fatal(err)
	}
	_, err = w.Close()
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("collision: %v", err)
	}
	if b, _ := os.ReadFile(files[0]); string(b) != "precious" {
		t.Errorf("existing file replaced: %q", b)
	}
	if _, err := os.Stat(w.stage); !os.IsNotExist(err) {
		t.Errorf("staging left: %v", err)
	}
}
