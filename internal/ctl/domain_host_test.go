package ctl_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// newCrawlWithDomains creates crawl name with the given domain entities.
func (e *env) newCrawlWithDomains(name string, domains ...string) {
	e.t.Helper()
	cr := crawl.New(name)
	cr.Seeds = []crawl.Seed{{URL: "http://" + domains[0] + "/"}}
	if err := cr.Validate(); err != nil {
		e.t.Fatal(err)
	}
	st, err := crawl.Open(e.s, name)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := st.Create(cr); err != nil {
		e.t.Fatal(err)
	}
	for _, d := range domains {
		if err := st.WriteDomain(crawl.NewDomain(d, d, time.Now().UTC()), true); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) domainShow(crawlName, arg string) (string, error) {
	e.t.Helper()
	err := e.ctl("").DomainShow(crawlName, arg)
	if err != nil {
		return "", err
	}
	var d struct {
		Domain string `json:"domain"`
	}
	if err := json.Unmarshal(e.stdout.Bytes(), &d); err != nil {
		e.t.Fatalf("%v: %s", err, e.stdout)
	}
	return d.Domain, nil
}

// TestDomainShowHostWithoutPort: a host without its port names the
// crawl's one domain on that host; several are a one-line error listing
// them (exit 1); a port written explicitly is never widened; ports 80 and
// 443 are not part of a domain name.
func TestDomainShowHostWithoutPort(t *testing.T) {
	e := newEnv(t)
	e.newCrawlWithDomains("one", "127.0.0.1:8080", "example.org")
	for arg, want := range map[string]string{
		"127.0.0.1":                  "127.0.0.1:8080",
		"http://127.0.0.1/page":      "127.0.0.1:8080",
		"127.0.0.1:8080":             "127.0.0.1:8080",
		"example.org":                "example.org",
		"example.org:443":            "example.org",
		"https://example.org:443/x/": "example.org",
	} {
		got, err := e.domainShow("one", arg)
		if err != nil || got != want {
			t.Errorf("domain show one %s: %q, %v; want %s", arg, got, err, want)
		}
	}
	if _, err := e.domainShow("one", "127.0.0.1:9090"); err == nil || !strings.Contains(err.Error(), "has no domain 127.0.0.1:9090") {
		t.Errorf("an explicit other port: %v", err)
	}

	e.newCrawlWithDomains("two", "127.0.0.1:8080", "127.0.0.1:9090", "[::1]:8080")
	_, err := e.domainShow("two", "127.0.0.1")
	if err == nil || ctl.ExitCode(err) != 1 || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "127.0.0.1:8080, 127.0.0.1:9090") {
		t.Fatalf("ambiguous host: %v (exit %d)", err, ctl.ExitCode(err))
	}
	if got, err := e.domainShow("two", "[::1]"); err != nil || got != "[::1]:8080" {
		t.Errorf("IPv6 host: %q, %v", got, err)
	}
	if _, err := e.domainShow("two", "example.org"); err == nil || !strings.Contains(err.Error(), "crawl two has no domain example.org") {
		t.Errorf("unknown host: %v", err)
	}
}
