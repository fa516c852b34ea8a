package ctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
)

// DomainsOptions are the flags of farroctl domains.
type DomainsOptions struct {
	Crawl  string // "" : every crawl
	Status []string
	JSON   bool
	By     string // "": by crawl and name; "priority": seed 004's score (priority.go); "yield": top domains (domains_list.go)
	Limit  int    // at most this many rows (0: all)
}

// domainsScope parses --status and --crawl: the statuses wanted (empty:
// all), the spool and the crawls to look at.
func (c *Ctl) domainsScope(o DomainsOptions) (map[crawl.DomainStatus]bool, *job.Spool, []string, error) {
	want := map[crawl.DomainStatus]bool{}
	for _, s := range o.Status {
		for _, part := range strings.Split(s, ",") {
			st := crawl.DomainStatus(strings.TrimSpace(part))
			if !st.Valid() {
				return nil, nil, nil, Usagef("unknown domain status %q (one of pending, active, exhausted, blocked, unreachable)", part)
			}
			want[st] = true
		}
	}
	s, err := c.existing()
	if err != nil {
		return nil, nil, nil, err
	}
	names := []string{o.Crawl}
	if o.Crawl == "" {
		if names, err = crawl.List(s); err != nil {
			return nil, nil, nil, err
		}
	} else if err := crawl.ValidateName(o.Crawl); err != nil {
		return nil, nil, nil, UsageError(err)
	}
	return want, s, names, nil
}

// eachDomain calls fn for every domain of the named crawls whose status
// is wanted (every status when want is empty).
func eachDomain(s *job.Spool, names []string, want map[crawl.DomainStatus]bool, fn func(crawlName string, d *crawl.Domain)) error {
	for _, n := range names {
		st, err := crawl.Open(s, n)
		if err != nil {
			return UsageError(err)
		}
		if !st.Exists() {
			return fmt.Errorf("crawl %s: %w", n, crawl.ErrNoCrawl)
		}
		doms, err := st.Domains()
		if err != nil {
			return err
		}
		for _, d := range doms {
			if len(want) == 0 || want[d.Status] {
				fn(n, d)
			}
		}
	}
	return nil
}

// Domains prints seed 004's domain-status table (or JSON Lines).
func (c *Ctl) Domains(o DomainsOptions) error {
	if o.Limit < 0 {
		return Usagef("domains --limit %d: must not be negative", o.Limit)
	}
	if o.By != "" {
		return c.domainsBy(o)
	}
	want, s, names, err := c.domainsScope(o)
	if err != nil {
		return err
	}
	var rows []*DomainSummary
	if err := eachDomain(s, names, want, func(n string, d *crawl.Domain) {
		rows = append(rows, domainSummary(n, d))
	}); err != nil {
		return err
	}
	rows = rows[:limitOf(len(rows), o.Limit)]
	setCrawlStates(s, rows) // domains_next.go
	if o.JSON {
		enc := json.NewEncoder(c.Stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	return printDomains(c.Stdout, rows, o.Crawl == "", c.now())
}

// canonicalDomain accepts a domain, host[:port] or URL and returns its
// canonical domain name.
func canonicalDomain(cr *crawl.Crawl, arg string) (string, error) {
	raw := arg
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw + "/"
	}
	u, err := cr.NormalizeURL(raw)
	if err != nil {
		return "", UsageError(fmt.Errorf("domain %q: %v", arg, err))
	}
	d, _, err := crawl.DomainOf(u)
	if err != nil {
		return "", UsageError(err)
	}
	return d, nil
}

// DomainShow prints a domain's entity as JSON, with its pending count.
func (c *Ctl) DomainShow(name, domain string) error {
	_, st, cr, err := c.crawlStore(name)
	if err != nil {
		return err
	}
	_, d, err := resolveDomain(st, cr, domain)
	if err != nil {
		return err
	}
	out := struct {
		*crawl.Domain
		Pending  int64                `json:"pending"`
		GaveUp   bool                 `json:"gave_up"`
		Registry *crawl.RegistryEntry `json:"registry,omitempty"` // domain_registry.go
		shownImages
	}{d, d.Pending(), (d.Status == crawl.DomainBlocked || d.Status == crawl.DomainUnreachable) && d.NextCrawlAfter == nil,
		c.registryEntryOf(d.Domain), showImages(st, cr, d)} // images.go
	b, _ := json.MarshalIndent(out, "", "  ")
	_, err = fmt.Fprintf(c.Stdout, "%s\n", b)
	return err
}

// DomainReset resets a domain and re-crawls it (DomainResetWith with
// the defaults).
func (c *Ctl) DomainReset(name, domain string) error {
	return c.DomainResetWith(DomainResetOptions{Crawl: name, Domain: domain})
}

// DomainResetOptions are the flags of farroctl domain reset.
type DomainResetOptions struct {
	Crawl, Domain string
	Reason        string // the operator's words, kept in the domain's reason detail
	// NoRecrawl: only clear the status (pages already fetched are not
	// fetched again; the URLs still queued are released).
	NoRecrawl bool
}

// DomainResetWith puts a domain back to pending: status, error streaks,
// cooldowns and the robots.txt cache are cleared. With no frontier driving
// the crawl that is done at once; otherwise the frontier is asked and
// applies it within its poll interval. Unless NoRecrawl, the domain is
// then re-crawled: a recrawl request makes the frontier queue every URL
// the domain knows again in a new round (domain_reset.go).
func (c *Ctl) DomainResetWith(o DomainResetOptions) (err error) {
	defer c.auditDone(&err, "domain reset", o.Crawl+" "+o.Domain, o.Reason)
	if strings.ContainsAny(o.Reason, "\r\n") || len(o.Reason) > 1024 {
		return Usagef("domain reset --reason: one line of at most 1024 bytes")
	}
	_, st, cr, err := c.crawlStore(o.Crawl)
	if err != nil {
		return err
	}
	dn, d, err := resolveDomain(st, cr, o.Domain)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	regMsg, err := c.resetRegistry(dn, o.Reason, now) // domain_registry.go
	if err != nil {
		return err
	}
	l, err := crawl.TryFlock(st.Path(crawl.FrontierLock))
	if err == nil {
		defer l.Unlock()
		d, err = st.LoadDomain(dn)
		if err != nil {
			return err
		}
		from := d.Status
		d.Reset(now)
		d.ReasonDetail = resetDetail(o.Reason)
		if err := st.WriteDomain(d, true); err != nil {
			return err
		}
		msg, err := recrawl(st, cr, dn, o, now) // domain_reset.go
		fmt.Fprintf(c.Stdout, "%s: %s -> pending (reset)%s%s\n", dn, from, msg, regMsg)
		return err
	}
	if !errors.Is(err, crawl.ErrBusy) {
		return err
	}
	if _, err := st.PutRequest(crawl.Request{Op: crawl.OpReset, Domain: dn, Actor: Actor, Reason: o.Reason, RequestedAt: now}); err != nil {
		return err
	}
	msg, err := recrawl(st, cr, dn, o, now)
	fmt.Fprintf(c.Stdout, "%s: %s; reset requested (the crawl's frontier applies it)%s%s\n", dn, d.Status, msg, regMsg)
	return err
}
