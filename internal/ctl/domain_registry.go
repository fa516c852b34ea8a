package ctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// The spool's domain registry (internal/crawl, registry.go) from the
// command line: domains --registry, domain show DOMAIN, domain reset
// DOMAIN, domains migrate.

// registryDomain canonicalises a domain argument by the default crawl
// options (no crawl is named).
func registryDomain(arg string) (string, error) {
	return canonicalDomain(crawl.New("registry"), arg)
}

// RegistryDomains prints the registry's entries: status, reason,
// cooldown, last crawl, lifetime counters and the crawls that know each
// domain (o.Status, o.Limit and o.Crawl, the domains a crawl knows,
// apply; o.JSON for JSON Lines).
func (c *Ctl) RegistryDomains(o DomainsOptions) error {
	if o.Limit < 0 {
		return Usagef("domains --limit %d: must not be negative", o.Limit)
	}
	if o.By != "" {
		return Usagef("domains --registry lists the spool's registry by domain: it takes no --by")
	}
	if o.Crawl != "" {
		if err := crawl.ValidateName(o.Crawl); err != nil {
			return UsageError(err)
		}
	}
	want, s, _, err := c.domainsScope(DomainsOptions{Status: o.Status})
	if err != nil {
		return err
	}
	reg := crawl.OpenRegistry(s)
	es, err := reg.Entries(func(name string, err error) {
		fmt.Fprintf(c.Stderr, "farroctl: domain registry: %v\n", err)
	})
	if err != nil {
		return err
	}
	var rows []*crawl.RegistryEntry
	for _, e := range es {
		if (len(want) == 0 || want[e.Status]) && (o.Crawl == "" || e.Crawls[o.Crawl] != nil) {
			rows = append(rows, e)
		}
	}
	rows = rows[:limitOf(len(rows), o.Limit)]
	if o.JSON {
		enc := json.NewEncoder(c.Stdout)
		for _, e := range rows {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rows) == 0 && !reg.Built() {
		fmt.Fprintln(c.Stdout, "the domain registry is empty (managerd builds it from the crawls at its first start; farroctl domains migrate builds it now)")
		return nil
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tSTATUS\tREASON\tUNTIL\tLAST CRAWLED\tPAGES\tNEW\tERRORS\tCRAWLS")
	for _, e := range rows {
		until, last := "-", "-"
		if e.CooldownUntil != nil && (e.Status == crawl.DomainBlocked || e.Status == crawl.DomainUnreachable) {
			until = e.CooldownUntil.UTC().Format("2006-01-02 15:04:05")
		}
		if e.LastCrawledAt != nil {
			last = e.LastCrawledAt.UTC().Format("2006-01-02 15:04:05")
		}
		reason := e.Reason
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", e.Domain, e.Status, reason, until, last, e.PagesCrawled, e.PagesNew, e.Errors,
			strings.Join(e.CrawlNames(), ","))
	}
	return tw.Flush()
}

// RegistryShow prints a domain's registry entry as JSON.
func (c *Ctl) RegistryShow(arg string) error {
	s, err := c.existing()
	if err != nil {
		return err
	}
	dn, err := registryDomain(arg)
	if err != nil {
		return err
	}
	e, err := crawl.OpenRegistry(s).Load(dn)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the domain registry has no domain %s", dn)
		}
		return err
	}
	b, _ := json.MarshalIndent(e, "", "  ")
	_, err = fmt.Fprintf(c.Stdout, "%s\n", b)
	return err
}

// registryEntryOf is the registry's entry of dn for domain show (nil
// when there is none or it cannot be read: the crawl's view is still
// shown).
func (c *Ctl) registryEntryOf(dn string) *crawl.RegistryEntry {
	s, err := c.existing()
	if err != nil {
		return nil
	}
	e, err := crawl.OpenRegistry(s).Load(dn)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(c.Stderr, "farroctl: domain registry: %v\n", err)
		}
		return nil
	}
	return e
}

// resetRegistry puts dn's registry entry back to pending, so that every
// crawl crawls it again (one holding it for the registry frees it within
// a few seconds). It says what it did, for the command's line.
func (c *Ctl) resetRegistry(dn, reason string, now time.Time) (string, error) {
	s, err := c.existing()
	if err != nil {
		return "", err
	}
	from := crawl.DomainStatus("")
	var checks []string
	errs, err := crawl.OpenRegistry(s).Update([]string{dn}, func(_ string, e *crawl.RegistryEntry) *crawl.RegistryEntry {
		if e == nil {
			return nil
		}
		from, checks = e.Status, e.Checks.SourceNames()
		e.Reset(resetDetail(reason), now)
		return e
	})
	if err == nil {
		err = errs[dn]
	}
	if err != nil && !errors.Is(err, crawl.ErrRegistryCorrupt) {
		return "", fmt.Errorf("%s: domain registry: %w", dn, err)
	}
	if from == "" {
		return "", nil
	}
	return fmt.Sprintf("; registry %s -> pending (every crawl crawls it again)", from) + c.releaseDeferred(s, checks, now), nil
}

// RegistryReset resets a domain's registry entry only (domain reset
// DOMAIN, no crawl named): every crawl meeting it, or holding it for the
// registry, crawls it again.
func (c *Ctl) RegistryReset(arg, reason string) (err error) {
	defer c.auditDone(&err, "domain reset", arg, reason)
	if strings.ContainsAny(reason, "\r\n") || len(reason) > 1024 {
		return Usagef("domain reset --reason: one line of at most 1024 bytes")
	}
	dn, err := registryDomain(arg)
	if err != nil {
		return err
	}
	msg, err := c.resetRegistry(dn, reason, time.Now().UTC())
	if err != nil {
		return err
	}
	if msg == "" {
		return fmt.Errorf("the domain registry has no domain %s", dn)
	}
	_, err = fmt.Fprintf(c.Stdout, "%s%s\n", dn, msg)
	return err
}

// DomainsMigrate builds the domain registry from the crawls' domain files
// (managerd does it at its first start on a spool without a registry):
// one line per domain, what is (or, with dryRun, would be) written.
func (c *Ctl) DomainsMigrate(dryRun bool) (err error) {
	if !dryRun {
		defer c.auditDone(&err, "domains migrate", "", "")
	}
	s, err := c.existing()
	if err != nil {
		return err
	}
	plan, err := crawl.MigrateRegistry(s, dryRun, time.Now().UTC(), func(err error) {
		fmt.Fprintf(c.Stderr, "farroctl: %v\n", err)
	})
	verb := "write"
	if dryRun {
		verb = "would write"
	}
	for _, p := range plan {
		e := p.Entry
		how := "new"
		if p.Existed {
			how = "merged"
		}
		line := fmt.Sprintf("%s %s/%s (%s): %s", verb, crawl.RegistryDir, crawl.DomainFile(e.Domain), how, e.Status)
		if e.Reason != "" {
			line += " (" + e.Reason + ")"
		}
		if e.StatusCrawl != "" {
			line += " from crawl " + e.StatusCrawl
		}
		if e.CooldownUntil != nil && (e.Status == crawl.DomainBlocked || e.Status == crawl.DomainUnreachable) {
			line += " until " + e.CooldownUntil.UTC().Format(time.RFC3339)
		}
		line += fmt.Sprintf("; pages %d, crawls %s", e.PagesCrawled, strings.Join(e.CrawlNames(), ","))
		fmt.Fprintln(c.Stdout, line)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "%d domain(s)%s\n", len(plan), map[bool]string{true: "; nothing written (--dry-run)", false: " in the registry"}[dryRun])
	return nil
}
