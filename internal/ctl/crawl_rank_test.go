package ctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// TestCrawlStartSeedRanks: seeds-file lines carry "rank=N" and
// "source=NAME" after the URL and its priority, in any order; --rank
// gives the --seed URLs a rank and --source every seed without a source
// of its own; a malformed line or flag is a usage error naming it, and
// no crawl is created.
func TestCrawlStartSeedRanks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "seeds")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := func(name string, o ctl.CrawlStartOptions) error {
		cr := crawl.New(name)
		cr.AllowPrivate = true
		o.Crawl, o.SeedsFile = cr, file
		return e.ctl("").CrawlStart(o)
	}
	write("http://a.test/ 5 rank=2 source=tranco_1\nhttp://b.test/ source=own rank=7 # comment\nhttp://c.test/\n")
	if err := start("ranked", ctl.CrawlStartOptions{Seeds: []string{"http://d.test/"}, Rank: 1, Source: "cli"}); err != nil {
		t.Fatal(err)
	}
	st, err := crawl.Open(e.s, "ranked")
	if err != nil {
		t.Fatal(err)
	}
	cr, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]crawl.Seed{}
	for _, s := range cr.Seeds {
		got[s.URL] = s
	}
	for u, want := range map[string]crawl.Seed{
		"http://a.test/": {Priority: 5, Rank: 2, Source: "tranco_1"},
		"http://b.test/": {Rank: 7, Source: "own"},
		"http://c.test/": {Source: "cli"},
		"http://d.test/": {Rank: 1, Source: "cli"},
	} {
		want.URL = u
		if got[u] != want {
			t.Errorf("seed %s: %+v, want %+v", u, got[u], want)
		}
	}
	for i, bad := range []struct {
		file, want string
		o          ctl.CrawlStartOptions
	}{
		{"http://a.test/ rank=0\n", "line 1: rank", ctl.CrawlStartOptions{}},
		{"http://a.test/\nhttp://b.test/ rank=x\n", "line 2: rank", ctl.CrawlStartOptions{}},
		{"http://a.test/ 1 2\n", "line 1: \"2\"", ctl.CrawlStartOptions{}},
		{"http://a.test/ depth=3\n", "line 1: \"depth=3\"", ctl.CrawlStartOptions{}},
		{"http://a.test/ source=\n", "line 1: source", ctl.CrawlStartOptions{}},
		{"http://a.test/ rank=1 rank=2\n", "line 1: \"rank=2\"", ctl.CrawlStartOptions{}},
		{"http://a.test/\n", "--rank -1", ctl.CrawlStartOptions{Rank: -1}},
		{"http://a.test/\n", "--source \"a b\"", ctl.CrawlStartOptions{Source: "a b"}},
	} {
		write(bad.file)
		name := "bad" + string(rune('a'+i))
		err := start(name, bad.o)
		if ctl.ExitCode(err) != ctl.ExitUsage || !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q %+v: %v, want a one-line usage error with %q", bad.file, bad.o, err, bad.want)
		}
		if _, err := os.Stat(filepath.Join(e.s.Root, "crawls", name)); !os.IsNotExist(err) {
			t.Errorf("%q: crawl %s created (%v)", bad.file, name, err)
		}
	}
}
