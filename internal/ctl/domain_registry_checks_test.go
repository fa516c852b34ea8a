package ctl_test

import (
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/source"
)

// TestDeferredSourceStatusAndReset: a source whose check the registry
// deferred reads "deferred" in pipeline status; domain reset DOMAIN makes
// it due again (and leaves a source that was not deferred alone).
func TestDeferredSourceStatusAndReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.addSource("held", "http://c.example/page")
	e.addSource("other", "http://c.example/other")
	now := time.Now().UTC()
	until := now.Add(30 * 24 * time.Hour)
	why := "domain c.example is blocked (login_required) in the domain registry, by the check of source held: not requested"
	if _, err := source.Update(e.s, "held", now, func(s *source.Source) error {
		s.Deferred, s.NextCheckAfter = why, &until
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour)
	if _, err := source.Update(e.s, "other", now, func(s *source.Source) error { s.NextCheckAfter = &later; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := crawl.OpenRegistry(e.s).Update([]string{"c.example"}, func(_ string, _ *crawl.RegistryEntry) *crawl.RegistryEntry {
		return &crawl.RegistryEntry{Domain: "c.example", Status: crawl.DomainBlocked, Reason: crawl.ReasonLoginRequired, StatusSource: "held",
			StatusAt: now, CooldownUntil: &until, Crawls: map[string]*crawl.RegistryCrawl{},
			Checks: &crawl.RegistryChecks{Sources: map[string]*crawl.RegistrySourceCheck{
				"held":  {CheckedAt: now, Result: crawl.CheckResultDeferred},
				"other": {CheckedAt: now, Result: crawl.CheckResultLoginWall},
				"../x":  {CheckedAt: now, Result: crawl.CheckResultOK}, // hostile: never a path
			}}}
	}); err != nil {
		t.Fatal(err)
	}
	row, line := e.sourceStatus("held")
	if row.State != "deferred" || !strings.Contains(line, " deferred ") {
		t.Errorf("pipeline status of a deferred source: %+v\n%s", row, line)
	}
	if err := e.ctl("").RegistryReset("c.example", "logged in"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.stdout.String(), "registry blocked -> pending") || !strings.Contains(e.stdout.String(), "1 deferred source check(s) due again") {
		t.Errorf("domain reset c.example: %s", e.stdout)
	}
	s, err := source.Load(e.s, "held")
	if err != nil {
		t.Fatal(err)
	}
	if s.Deferred != "" || !s.Due(time.Now()) {
		t.Errorf("deferred source after the reset: deferred %q, next %v", s.Deferred, s.NextCheckAfter)
	}
	if o, _ := source.Load(e.s, "other"); o.NextCheckAfter == nil || !o.NextCheckAfter.Equal(later) {
		t.Errorf("a source that was not deferred was moved: %v", o.NextCheckAfter)
	}
	if row, _ := e.sourceStatus("held"); row.State != "due" {
		t.Errorf("state after the reset: %s", row.State)
	}
}
