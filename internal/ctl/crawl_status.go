package ctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
)

// CrawlSummary is a crawl's progress: seed 001's pending-work
// quantification, from the crawl's files and the spool.
type CrawlSummary struct {
	Name        string      `json:"name"`
	State       crawl.State `json:"state"`
	StateReason string      `json:"state_reason,omitempty"`
	Run         int         `json:"run"`
	Scope       crawl.Scope `json:"scope"`
	Seeds       []string    `json:"seeds"`
	MaxDepth    int         `json:"max_depth"`
	CreatedAt   time.Time   `json:"created_at"`
	UpdatedAt   time.Time   `json:"updated_at"`
	FinishedAt  *time.Time  `json:"finished_at,omitempty"`
	// Frontier: "running" when a frontier holds the crawl's lock, else "none".
	Frontier string `json:"frontier"`

	Domains      int   `json:"domains"`
	Discovered   int64 `json:"discovered"`    // URLs queued (in scope, within depth, new)
	Released     int64 `json:"released"`      // URL jobs released
	RunReleased  int64 `json:"run_released"`  // released during the current run
	Fetched      int64 `json:"fetched"`       // finished with an HTTP response
	Failed       int64 `json:"failed"`        // network failure out of attempts, or killed
	RobotsDenied int64 `json:"robots_denied"` // dropped: robots.txt disallows them
	Refused      int64 `json:"refused"`       // the fetcher refused (private address, ...)
	Pending      int64 `json:"pending"`       // queued, not released yet
	InFlight     int   `json:"in_flight"`     // released, not finished (robots.txt jobs included)
	// PendingURLs is Pending as the frontier keeps it in frontier.json
	// (crawl_pending.go): one small read, at most a second or two old.
	PendingURLs int64 `json:"pending_urls"`

	// Dropped links, as the frontier counted them.
	OutOfScope int64 `json:"out_of_scope"`
	TooDeep    int64 `json:"too_deep"`
	Duplicates int64 `json:"duplicates"`
	Invalid    int64 `json:"invalid"`
	Filtered   int64 `json:"filtered"` // by a URL filter (--accept-regex, ...)

	DomainStatus map[crawl.DomainStatus]int `json:"domain_status"`
	HTTPStatus   map[string]int64           `json:"http_status"`
	// JobStates counts the crawl's jobs (URL and robots.txt) per spool state.
	JobStates map[job.State]int `json:"job_states,omitempty"`
	// Rate: URLs finished per second over the last minute of the current
	// run's running time (shorter for a run younger than a minute; ending
	// at finished_at for a finished crawl), RateWindowS long (crawlRate).
	RatePerSecond float64 `json:"rate_per_second"`
	RateWindowS   float64 `json:"rate_window_s"`
	// ElapsedMS is the crawl's own duration: created_at to finished_at
	// (to now while unfinished).
	ElapsedMS int64 `json:"elapsed_ms"`
	// AveragePerSecond is fetched over the crawl's own duration.
	AveragePerSecond float64          `json:"average_per_second"`
	PerDomain        []*DomainSummary `json:"per_domain,omitempty"`
	CrawlImages                       // images.go
	At               time.Time        `json:"at"`
}

// DomainSummary is one row of the domain-status table (seed 004 section
// 10.2).
type DomainSummary struct {
	Crawl          string             `json:"crawl"`
	Domain         string             `json:"domain"`
	ParentDomain   string             `json:"parent_domain,omitempty"`
	Status         crawl.DomainStatus `json:"status"`
	Reason         string             `json:"reason,omitempty"`
	ReasonDetail   string             `json:"reason_detail,omitempty"`
	Discovered     int64              `json:"pages_discovered"`
	Released       int64              `json:"pages_released"`
	Crawled        int64              `json:"pages_crawled"`
	Failed         int64              `json:"pages_failed"`
	RobotsDenied   int64              `json:"robots_denied"`
	Pending        int64              `json:"pending"`
	InFlight       int                `json:"in_flight"`
	Errors         int                `json:"total_error_count"`
	Consecutive    int                `json:"consecutive_error_count"`
	LastCrawledAt  *time.Time         `json:"last_crawled_at,omitempty"`
	NextCrawlAfter *time.Time         `json:"next_crawl_after,omitempty"`
	NextReleaseAt  *time.Time         `json:"next_release_at,omitempty"`
	Interval       float64            `json:"interval_seconds"`
	GaveUp         bool               `json:"gave_up,omitempty"`
	// CrawlState is the state of the domain's crawl: NEXT says when the
	// domain releases again only while the crawl runs (domains_next.go).
	CrawlState crawl.State `json:"crawl_state,omitempty"`
	// Recrawled: responses to refresh rounds' revisits, among Crawled
	// (the table's PAGES shows Crawled - Recrawled, the pages crawled at
	// least once, out of Discovered).
	Recrawled    int64 `json:"pages_recrawled"`
	DomainImages       // images.go
}

// PagesCrawledOnce is the pages crawled at least once (the responses to
// refresh rounds' revisits aside): never more than Discovered. The
// domain tables show it (PAGES, the dashboard's "pages crawled").
func (r *DomainSummary) PagesCrawledOnce() int64 { return r.Crawled - r.Recrawled }

func domainSummary(name string, d *crawl.Domain) *DomainSummary {
	return &DomainSummary{
		Crawl: name, Domain: d.Domain, ParentDomain: d.ParentDomain, Status: d.Status, Reason: d.Reason, ReasonDetail: d.ReasonDetail,
		Discovered: d.PagesDiscovered, Released: d.PagesReleased, Crawled: d.PagesCrawled, Failed: d.PagesFailed,
		RobotsDenied: d.RobotsDenied, Pending: d.Pending(), InFlight: len(d.InFlight), Errors: d.TotalErrorCount,
		Consecutive: d.ConsecutiveErrorCount + d.ConsecutiveNetErrorCount, LastCrawledAt: d.LastCrawledAt,
		NextCrawlAfter: d.NextCrawlAfter, NextReleaseAt: d.NextReleaseAt, Interval: d.IntervalSeconds,
		GaveUp:    (d.Status == crawl.DomainBlocked || d.Status == crawl.DomainUnreachable) && d.NextCrawlAfter == nil,
		Recrawled: d.PagesRecrawled, DomainImages: domainImages(d),
	}
}

// summarize computes a crawl's summary; full adds the per-domain rows and
// the per-state job counts (a scan of the spool).
func summarize(st *crawl.Store, full bool, now time.Time) (*CrawlSummary, error) {
	cr, err := st.Load()
	if err != nil {
		return nil, err
	}
	sum := &CrawlSummary{
		Name: cr.Name, State: cr.State, StateReason: cr.StateReason, Run: cr.Run, Scope: cr.Scope, MaxDepth: cr.MaxDepth,
		CreatedAt: cr.CreatedAt, UpdatedAt: cr.UpdatedAt, FinishedAt: cr.FinishedAt, Frontier: "none",
		DomainStatus: map[crawl.DomainStatus]int{}, HTTPStatus: map[string]int64{}, At: now,
	}
	for _, s := range cr.Seeds {
		sum.Seeds = append(sum.Seeds, s.URL)
	}
	sum.PageRequisites = cr.PageRequisites
	if l, err := crawl.TryFlock(st.Path(crawl.FrontierLock)); err == nil {
		l.Unlock()
	} else if errors.Is(err, crawl.ErrBusy) {
		sum.Frontier = "running"
	}
	doms, err := st.Domains()
	if err != nil {
		return nil, err
	}
	for _, st := range crawl.DomainStatuses {
		sum.DomainStatus[st] = 0
	}
	for _, d := range doms {
		sum.Domains++
		sum.Discovered += d.PagesDiscovered
		sum.Released += d.PagesReleased
		if d.Run == cr.Run {
			sum.RunReleased += d.RunReleased
		}
		sum.Fetched += d.PagesCrawled
		sum.Failed += d.PagesFailed
		sum.RobotsDenied += d.RobotsDenied
		sum.Refused += d.Refused
		sum.Pending += d.Pending()
		sum.InFlight += len(d.InFlight)
		sum.DomainStatus[d.Status]++
		sum.ImagesFound += d.ImagesFound
		sum.ImagesStored += d.ImagesStored
		for k, v := range d.StatusCounts {
			sum.HTTPStatus[k] += v
		}
		if full {
			ds := domainSummary(cr.Name, d)
			ds.CrawlState = cr.State
			sum.PerDomain = append(sum.PerDomain, ds)
		}
	}
	if fr, err := st.LoadFrontier(); err == nil {
		sum.OutOfScope, sum.TooDeep, sum.Duplicates, sum.Invalid = fr.OutOfScope, fr.TooDeep, fr.Duplicates, fr.Invalid
		sum.Filtered = fr.Filtered
		sum.PendingURLs = fr.PendingURLs
	}
	rate, window := crawlRate(st, cr, now)
	sum.RatePerSecond, sum.RateWindowS = rate, window.Seconds()
	elapsed := crawlElapsed(cr, now)
	sum.ElapsedMS = elapsed.Milliseconds()
	if elapsed > 0 {
		sum.AveragePerSecond = float64(sum.Fetched) / elapsed.Seconds()
	}
	if full {
		sum.JobStates = map[job.State]int{}
		for _, s := range job.States {
			ids, err := crawlJobs(st.Spool, cr.Name, []job.State{s})
			if err != nil {
				return nil, err
			}
			sum.JobStates[s] = len(ids)
		}
	}
	return sum, nil
}

// CrawlStatus prints one crawl's progress.
func (c *Ctl) CrawlStatus(name string, jsonOut bool) error {
	_, st, _, err := c.crawlStore(name)
	if err != nil {
		return err
	}
	sum, err := summarize(st, true, c.now())
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(c.Stdout).Encode(sum)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	state := string(sum.State)
	if sum.StateReason != "" {
		state += " (" + sum.StateReason + ")"
	}
	fmt.Fprintf(tw, "crawl\t%s\n", sum.Name)
	fmt.Fprintf(tw, "state\t%s\n", state)
	fmt.Fprintf(tw, "run\t%d (released %d this run)\n", sum.Run, sum.RunReleased)
	fmt.Fprintf(tw, "frontier\t%s\n", sum.Frontier)
	fmt.Fprintf(tw, "seeds\t%s (scope %s, max depth %d)\n", strings.Join(sum.Seeds, " "), sum.Scope, sum.MaxDepth)
	fmt.Fprintf(tw, "discovered\t%d\n", sum.Discovered)
	fmt.Fprintf(tw, "released\t%d\n", sum.Released)
	fmt.Fprintf(tw, "fetched\t%d\n", sum.Fetched)
	fmt.Fprintf(tw, "failed\t%d\n", sum.Failed)
	fmt.Fprintf(tw, "robots denied\t%d\n", sum.RobotsDenied)
	if sum.Refused > 0 {
		fmt.Fprintf(tw, "refused\t%d\n", sum.Refused)
	}
	fmt.Fprintf(tw, "pending\t%d\n", sum.Pending)
	fmt.Fprintf(tw, "in flight\t%d\n", sum.InFlight)
	if sum.ImagesFound > 0 || len(sum.PageRequisites) > 0 {
		fmt.Fprintf(tw, "images\t%d found, %d stored (page requisites: %s)\n", sum.ImagesFound, sum.ImagesStored, dash(strings.Join(sum.PageRequisites, ",")))
	}
	fmt.Fprintf(tw, "dropped links\t%d out of scope, %d too deep, %d duplicates, %d invalid, %d filtered\n", sum.OutOfScope, sum.TooDeep, sum.Duplicates, sum.Invalid, sum.Filtered)
	fmt.Fprintf(tw, "rate\t%.2f URLs/s (over the last %s of running time); %.2f pages/s fetched over the crawl's %s\n", sum.RatePerSecond,
		time.Duration(sum.RateWindowS*float64(time.Second)).Round(time.Second), sum.AveragePerSecond, time.Duration(sum.ElapsedMS)*time.Millisecond)
	var js []string
	for _, s := range job.States {
		if n := sum.JobStates[s]; n > 0 {
			js = append(js, fmt.Sprintf("%s %d", s, n))
		}
	}
	fmt.Fprintf(tw, "jobs\t%s\n", dash(strings.Join(js, ", ")))
	var ds []string
	for _, s := range crawl.DomainStatuses {
		if n := sum.DomainStatus[s]; n > 0 {
			ds = append(ds, fmt.Sprintf("%s %d", s, n))
		}
	}
	fmt.Fprintf(tw, "domains\t%d (%s)\n", sum.Domains, dash(strings.Join(ds, ", ")))
	codes := make([]string, 0, len(sum.HTTPStatus))
	for k := range sum.HTTPStatus {
		codes = append(codes, k)
	}
	sort.Strings(codes)
	var hs []string
	for _, k := range codes {
		hs = append(hs, fmt.Sprintf("%s: %d", k, sum.HTTPStatus[k]))
	}
	fmt.Fprintf(tw, "http status\t%s\n", dash(strings.Join(hs, ", ")))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(sum.PerDomain) > 0 {
		fmt.Fprintln(c.Stdout)
		return printDomains(c.Stdout, sum.PerDomain, false, c.now())
	}
	return nil
}

// printDomains prints seed 004's domain-status table, each row followed
// by its reason, if any, on a line of its own.
func printDomains(w io.Writer, rows []*DomainSummary, withCrawl bool, now time.Time) error {
	head := []string{"DOMAIN", "STATUS", "PAGES", "PENDING", "IN-FLIGHT", "ERRORS", "LAST CRAWLED", "NEXT"}
	if withCrawl {
		head = append([]string{"CRAWL"}, head...)
	}
	table := [][]string{head}
	var reasons []string
	for _, r := range rows {
		last := "-"
		if r.LastCrawledAt != nil {
			last = r.LastCrawledAt.UTC().Format("2006-01-02 15:04:05")
		}
		next := nextColumn(r, now) // domains_next.go
		row := []string{r.Domain, string(r.Status), fmt.Sprintf("%d/%d", r.PagesCrawledOnce(), r.Discovered), fmt.Sprint(r.Pending),
			fmt.Sprint(r.InFlight), fmt.Sprint(r.Errors), last, next}
		if withCrawl {
			row = append([]string{r.Crawl}, row...)
		}
		table = append(table, row)
		reason := ""
		if r.Reason != "" {
			reason = r.Reason
			if r.ReasonDetail != "" {
				reason += ": " + r.ReasonDetail
			}
			reason = "  └─ reason: " + truncate(reason, 160)
		}
		reasons = append(reasons, reason)
	}
	widths := make([]int, len(head))
	for _, row := range table {
		for i, c := range row {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	for n, row := range table {
		for i, c := range row {
			if i == len(row)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-len([]rune(c))+2))
		}
		b.WriteString("\n")
		if n > 0 && reasons[n-1] != "" {
			b.WriteString(reasons[n-1] + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
