package ctl_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// TestCrawlStartRefusesPrivateSeeds: a seed that goes to a loopback or
// private address (an IP literal, a --resolve entry, a name that resolves
// there) is refused without --allow-private, with a one-line error naming
// the flag and no crawl created; with --allow-private, or for a public
// address, the crawl is created.
func TestCrawlStartRefusesPrivateSeeds(t *testing.T) {
	e := newEnv(t)
	start := func(name string, allow bool, resolve []string, seeds ...string) error {
		cr := crawl.New(name)
		cr.AllowPrivate = allow
		return e.ctl("").CrawlStart(ctl.CrawlStartOptions{Crawl: cr, Seeds: seeds, Resolve: resolve})
	}
	refused := []struct {
		name, seed, addr string
		resolve          []string
	}{
		{"literal", "http://127.0.0.1:8080/", "127.0.0.1", nil},
		{"rfc1918", "https://10.1.2.3/", "10.1.2.3", nil},
		{"v6", "http://[::1]:81/x", "::1", nil},
		{"metadata", "http://169.254.169.254/latest/", "169.254.169.254", nil},
		{"resolve", "http://a.site.test/", "192.168.1.7", []string{"a.site.test:80:192.168.1.7"}},
		{"localhost", "http://localhost:9/", "", nil}, // /etc/hosts: 127.0.0.1 or ::1
	}
	for _, c := range refused {
		err := start("p-"+c.name, false, c.resolve, c.seed)
		var ce *ctl.Error
		if err == nil || !errors.As(err, &ce) || ce.Code != ctl.ExitUsage {
			t.Fatalf("%s: crawl start %s: %v, want a usage error", c.name, c.seed, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "--allow-private") || !strings.Contains(msg, c.addr) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q: want one line naming %s and --allow-private", c.name, msg, c.addr)
		}
		if _, err := os.Stat(e.s.Root + "/crawls/p-" + c.name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: refused crawl left %v", c.name, err)
		}
	}
	// Several: the first is named, the others counted.
	err := start("several", false, nil, "http://127.0.0.1/", "http://10.0.0.1/", "http://1.1.1.1/")
	if err == nil || !strings.Contains(err.Error(), "seed http://127.0.0.1/") || !strings.Contains(err.Error(), "and 1 more seeds") {
		t.Errorf("several private seeds: %v", err)
	}
	// Allowed: the flag, a public address, a private seed's host given a
	// public address by --resolve.
	if err := start("allowed", true, nil, "http://127.0.0.1:8080/"); err != nil {
		t.Errorf("--allow-private: %v", err)
	}
	if err := start("public", false, nil, "http://1.1.1.1/"); err != nil {
		t.Errorf("public seed: %v", err)
	}
	if err := start("resolved-public", false, []string{"127.0.0.1:80:1.1.1.1"}, "http://127.0.0.1/"); err != nil {
		t.Errorf("seed resolved to a public address: %v", err)
	}
	for _, n := range []string{"allowed", "public", "resolved-public"} {
		if _, err := os.Stat(e.s.Root + "/crawls/" + n + "/crawl.json"); err != nil {
			t.Errorf("crawl %s not created: %v", n, err)
		}
	}
}
