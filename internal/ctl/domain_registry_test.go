package ctl_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// TestDomainRegistryCommands: domains migrate --dry-run prints what would
// be written and writes nothing; domains migrate builds the registry;
// domains --registry lists it with the crawls that know each domain;
// domain show DOMAIN prints the entry and domain show CRAWL DOMAIN the
// crawl's view with it; domain reset CRAWL DOMAIN resets the registry's
// entry too, domain reset DOMAIN only it.
func TestDomainRegistryCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now().UTC()
	until := now.Add(14 * 24 * time.Hour)
	e.newCrawlWithDomains("one", "a.example")
	blocked := crawl.NewDomain("b.example", "b.example", now)
	blocked.Status, blocked.Reason, blocked.NextCrawlAfter, blocked.PagesCrawled = crawl.DomainBlocked, crawl.ReasonForbidden, &until, 3
	e.writeDomain("one", blocked)
	done := crawl.NewDomain("a.example", "a.example", now)
	done.Status, done.PagesCrawled = crawl.DomainExhausted, 5
	e.writeDomain("one", done)
	e.newCrawlWithDomains("two", "a.example")

	if err := e.ctl("").DomainsMigrate(true); err != nil {
		t.Fatal(err)
	}
	out := e.stdout.String()
	if !strings.Contains(out, "would write domains/b.example.json (new): blocked (forbidden) from crawl one until "+until.Format(time.RFC3339)) ||
		!strings.Contains(out, "would write domains/a.example.json (new): exhausted from crawl one; pages 5, crawls one,two") ||
		!strings.Contains(out, "2 domain(s); nothing written (--dry-run)") {
		t.Errorf("domains migrate --dry-run:\n%s", out)
	}
	if _, err := os.Stat(e.s.Path(crawl.RegistryDir)); !os.IsNotExist(err) {
		t.Errorf("a dry run made the registry: %v", err)
	}
	if err := e.ctl("").RegistryDomains(ctl.DomainsOptions{}); err != nil || !strings.Contains(e.stdout.String(), "registry is empty") {
		t.Errorf("domains --registry before migrate: %v\n%s", err, e.stdout)
	}
	if err := e.ctl("").DomainsMigrate(false); err != nil || !strings.Contains(e.stdout.String(), "2 domain(s) in the registry") {
		t.Fatalf("domains migrate: %v\n%s", err, e.stdout)
	}

	if err := e.ctl("").RegistryDomains(ctl.DomainsOptions{Status: []string{"blocked"}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(e.stdout.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "DOMAIN") || !strings.HasPrefix(lines[1], "b.example") ||
		!strings.Contains(lines[1], "forbidden") || !strings.Contains(lines[1], until.Format("2006-01-02 15:04:05")) || !strings.HasSuffix(lines[1], "one") {
		t.Errorf("domains --registry --status blocked:\n%s", e.stdout)
	}
	if err := e.ctl("").RegistryDomains(ctl.DomainsOptions{By: "yield"}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Errorf("domains --registry --by: %v", err)
	}
	if err := e.ctl("").RegistryDomains(ctl.DomainsOptions{Crawl: "two", JSON: true}); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(e.stdout.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"domain":"a.example"`) {
		t.Errorf("domains --registry --crawl two --json (crawl two knows a.example only):\n%s", e.stdout)
	}

	var entry crawl.RegistryEntry
	if err := e.ctl("").RegistryShow("http://B.example/x"); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.stdout.Bytes(), &entry); err != nil || entry.Domain != "b.example" || entry.Status != crawl.DomainBlocked || entry.PagesCrawled != 3 {
		t.Errorf("domain show b.example: %v\n%s", err, e.stdout)
	}
	if err := e.ctl("").RegistryShow("none.example"); err == nil || !strings.Contains(err.Error(), "no domain none.example") {
		t.Errorf("domain show of an unknown domain: %v", err)
	}
	if err := e.ctl("").DomainShow("one", "b.example"); err != nil {
		t.Fatal(err)
	}
	var both struct {
		Status   crawl.DomainStatus   `json:"status"`
		Registry *crawl.RegistryEntry `json:"registry"`
	}
	if err := json.Unmarshal(e.stdout.Bytes(), &both); err != nil || both.Registry == nil || both.Registry.StatusCrawl != "one" {
		t.Errorf("domain show one b.example: %v\n%s", err, e.stdout)
	}

	// A crawl's reset resets the registry's entry: every crawl crawls it again.
	if err := e.ctl("").DomainResetWith(ctl.DomainResetOptions{Crawl: "one", Domain: "b.example", Reason: "fixed", NoRecrawl: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.stdout.String(), "registry blocked -> pending (every crawl crawls it again)") {
		t.Errorf("domain reset one b.example: %s", e.stdout)
	}
	reg := crawl.OpenRegistry(e.s)
	if b, err := reg.Load("b.example"); err != nil || b.Status != crawl.DomainPending || b.Reason != crawl.ReasonReset || b.CooldownUntil != nil {
		t.Errorf("registry after the reset: %+v %v", b, err)
	}
	// The registry alone.
	if err := e.ctl("").RegistryReset("a.example", "again"); err != nil || !strings.Contains(e.stdout.String(), "a.example; registry exhausted -> pending") {
		t.Errorf("domain reset a.example: %v %s", err, e.stdout)
	}
	if a, err := reg.Load("a.example"); err != nil || a.Status != crawl.DomainPending || !strings.Contains(a.ReasonDetail, "again") {
		t.Errorf("registry after domain reset a.example: %+v %v", a, err)
	}
	if err := e.ctl("").RegistryReset("none.example", ""); err == nil {
		t.Error("domain reset of a domain the registry lacks succeeded")
	}
}
