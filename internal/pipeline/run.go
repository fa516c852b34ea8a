package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// Mode is what a run does.
type Mode string

// Modes of farroctl pipeline.
const (
	ModeRun     Mode = "run"     // check due sources (and acquire what changed), acquire pending sources, refresh due domains
	ModeCheck   Mode = "check"   // check due sources only: changed ones are left acquire_pending
	ModeAcquire Mode = "acquire" // acquire pending sources and refresh due domains; no checks
)

// DefaultRefreshInterval is how long an exhausted domain rests before it
// is refreshed (seed 004 section 6.3: 14 days).
const DefaultRefreshInterval = 14 * 24 * time.Hour

// DefaultMaxRefresh caps the domains a run refreshes.
const DefaultMaxRefresh = 20

// RunOptions configure one run.
type RunOptions struct {
	Mode   Mode
	DryRun bool // plan only: nothing is written
	Politeness
	// RefreshInterval: exhausted domains whose last response is older are
	// refreshed (0: no domain refresh). MaxRefresh caps them per run
	// (0: no cap).
	RefreshInterval time.Duration
	MaxRefresh      int
	Now             time.Time
	// Jobs is the job store the check jobs are submitted to and looked
	// up in (on a spool, spoolstore.New of it); it may be nil only with
	// DryRun.
	Jobs store.Store
}

// CheckEntry is one planned (or submitted) check.
type CheckEntry struct {
	Source         string     `json:"source"`
	Domain         string     `json:"domain"`
	URL            string     `json:"url"`
	NextCheckAfter *time.Time `json:"next_check_after,omitempty"` // when it became due (nil: never checked)
	Slot           int        `json:"slot"`
	NotBefore      time.Time  `json:"not_before"`
	JobID          string     `json:"job_id"`
	Status         string     `json:"status"` // planned, submitted, already_queued, error
	Error          string     `json:"error,omitempty"`
	// Budget: what the acquisition this check may make can spend (nil:
	// it does not acquire; the source is left acquire_pending).
	Budget *RunBudget `json:"budget,omitempty"`
}

// LeftEntry is a due source left for the next run.
type LeftEntry struct {
	Source         string     `json:"source"`
	Domain         string     `json:"domain"`
	NextCheckAfter *time.Time `json:"next_check_after,omitempty"`
}

// AcquireEntry is one acquisition of a pending source.
type AcquireEntry struct {
	Source string         `json:"source"`
	Crawl  string         `json:"crawl"`
	Status string         `json:"status"` // planned, done, left (the run's caps leave it nothing), deferred (the domain registry), error
	Result *AcquireResult `json:"result,omitempty"`
	Error  string         `json:"error,omitempty"`
	Budget *RunBudget     `json:"budget,omitempty"` // its share of the run's requests
}

// RefreshEntry is one due domain, refreshed or left.
type RefreshEntry struct {
	Crawl         string    `json:"crawl"`
	Domain        string    `json:"domain"`
	YieldRate     float64   `json:"yield_rate"`
	LastCrawledAt time.Time `json:"last_crawled_at"`
	Score         int       `json:"score"`
	Status        string    `json:"status"` // planned, requested, left, deferred, error
	Error         string    `json:"error,omitempty"`
	// Deferred says why the domain is not refreshed: the domain registry
	// defers it (registry.go).
	Deferred string `json:"deferred,omitempty"`
}

// Report is what a run did (or, dry, would do).
type Report struct {
	Mode       Mode             `json:"mode"`
	DryRun     bool             `json:"dry_run"`
	At         time.Time        `json:"at"`
	Checks     []CheckEntry     `json:"checks"`
	Left       []LeftEntry      `json:"left"`
	NotDue     int              `json:"not_due"`
	Acquire    []AcquireEntry   `json:"acquire"`
	Refresh    []RefreshEntry   `json:"refresh"`
	Problems   []source.Problem `json:"problems,omitempty"`
	Errors     int              `json:"errors"`
	DurationMS int64            `json:"duration_ms"`
}

// CheckJobID is the ID of source name's check for due stamp due (n > 1:
// the n-th job for that check, when earlier ones ended without checking).
func CheckJobID(name, due string, n int) string {
	id := "sc-" + name + "-" + due
	if n > 1 {
		id += "-" + strconv.Itoa(n)
	}
	return id
}

// Run does one pipeline run over spool sp. With DryRun nothing is written
// (sp may be a spool opened without completing its layout).
func Run(sp *job.Spool, o RunOptions) (*Report, error) {
	start := time.Now()
	if o.Now.IsZero() {
		o.Now = time.Now().UTC()
	}
	rep := &Report{Mode: o.Mode, DryRun: o.DryRun, At: o.Now, Checks: []CheckEntry{}, Left: []LeftEntry{}, Acquire: []AcquireEntry{}, Refresh: []RefreshEntry{}}
	switch o.Mode {
	case ModeRun, ModeCheck, ModeAcquire:
	default:
		return nil, fmt.Errorf("unknown pipeline mode %q (run, check, acquire)", o.Mode)
	}
	if o.Jobs == nil && !o.DryRun {
		return nil, errors.New("pipeline run: no job store to submit the checks to")
	}
	srcs, probs, err := source.List(sp)
	if err != nil {
		return nil, err
	}
	rep.Problems = probs
	// The checks are planned first: the acquisitions share what the
	// run's request caps leave after them (budget.go).
	var plan *Plan
	if o.Mode != ModeAcquire {
		pl := MakePlan(srcs, o.Politeness.effective(), o.Now)
		plan = &pl
	}
	var pending []*source.Source
	if o.Mode != ModeCheck {
		for _, s := range srcs {
			if s.AcquirePending {
				pending = append(pending, s)
			}
		}
	}
	var queue []Planned
	if plan != nil {
		queue = plan.Queue
	}
	bud := newBudgeter(o.Politeness, queue, pending, o.Mode == ModeRun)
	if o.Mode != ModeCheck {
		for _, s := range pending {
			e := AcquireEntry{Source: s.Name, Crawl: s.Crawl, Status: "planned"}
			b, ok := bud.share(s.Domain)
			e.Budget = &b
			if !ok {
				e.Status = "left"
				rep.Acquire = append(rep.Acquire, e)
				continue
			}
			if !o.DryRun {
				r, err := AcquireWith(sp, s.Name, o.Now, b)
				if err != nil {
					e.Status, e.Error = "error", err.Error()
					rep.Errors++
				} else {
					e.Status, e.Result = "done", &r
					if r.Deferred != "" {
						e.Status = "deferred"
					}
				}
			} else if why, _ := registryDefers(sp, s.Domain, o.Now); why != "" {
				e.Status = "deferred"
				e.Result = &AcquireResult{Source: s.Name, Crawl: s.Crawl, Deferred: why}
			}
			rep.Acquire = append(rep.Acquire, e)
		}
	}
	if plan != nil {
		rep.NotDue = len(plan.NotDue)
		for _, q := range plan.Queue {
			e := CheckEntry{Source: q.Source.Name, Domain: q.Domain, URL: q.Source.URL, NextCheckAfter: q.Source.NextCheckAfter,
				Slot: q.Slot, NotBefore: q.NotBefore, JobID: CheckJobID(q.Source.Name, q.Source.DueStamp(), 1), Status: "planned"}
			b, acquire := bud.share(q.Domain)
			acquire = acquire && o.Mode == ModeRun
			if acquire {
				e.Budget = &b
			}
			if !o.DryRun {
				id, status, err := submitCheck(o.Jobs, q, acquire, o.MinDomainInterval, b)
				e.JobID, e.Status = id, status
				if err != nil {
					e.Error = err.Error()
					rep.Errors++
				}
			}
			rep.Checks = append(rep.Checks, e)
		}
		for _, s := range plan.Left {
			rep.Left = append(rep.Left, LeftEntry{Source: s.Name, Domain: s.Domain, NextCheckAfter: s.NextCheckAfter})
		}
	}
	if o.Mode != ModeCheck && o.RefreshInterval > 0 {
		if err := refreshDomains(sp, o, srcs, rep); err != nil {
			return nil, err
		}
	}
	rep.DurationMS = time.Since(start).Milliseconds()
	return rep, nil
}

// submitCheck submits q's check job to the job store. The ID is a
// function of the source and the check it is due for, so a run repeated
// (after a crash, or by an impatient operator) before the check ran finds
// it queued already.
func submitCheck(jobs store.Store, q Planned, acquire bool, interval time.Duration, b RunBudget) (string, string, error) {
	ctx := context.Background()
	cp := CheckPrompt{Source: q.Source.Name, Due: q.Source.DueStamp(), Acquire: acquire, MinIntervalMS: interval.Milliseconds()}
	if acquire {
		cp.Budget = b
	}
	p, _ := json.Marshal(cp)
	for n := 1; n <= 20; n++ {
		id := CheckJobID(q.Source.Name, q.Source.DueStamp(), n)
		_, errs := jobs.Submit(ctx, []job.SubmitRequest{{ID: id, Kind: KindCheck, NotBefore: q.NotBefore, Prompt: p, Actor: "farroctl/" + Actor}})
		err := errs[0]
		if err == nil {
			return id, "submitted", nil
		}
		if !errors.Is(err, job.ErrDuplicate) {
			return id, "error", fmt.Errorf("submit %s: %w", id, err)
		}
		j, lerr := jobs.Get(ctx, id)
		if errors.Is(lerr, job.ErrNotFound) {
			return id, "error", fmt.Errorf("submit %s: %w (its lock is held: try again shortly)", id, err)
		}
		if lerr != nil {
			return id, "error", fmt.Errorf("submit %s: %w (and it cannot be read: %v)", id, err, lerr)
		}
		if !j.Status.Terminal() {
			return id, "already_queued", nil
		}
		// Ended without moving the source on (killed, or out of
		// attempts): a new job for the same check.
	}
	return "", "error", fmt.Errorf("source %s: 20 check jobs for due %s ended without checking; see farroctl ls", q.Source.Name, q.Source.DueStamp())
}

// refreshDomains finds the exhausted domains due for a refresh in every
// crawl (except sources' crawls, refreshed when their source changes),
// orders them as seed 004's refresh query (yield first, then staleness),
// and asks their frontiers to refresh the first MaxRefresh.
func refreshDomains(sp *job.Spool, o RunOptions, srcs []*source.Source, rep *Report) error {
	owned := map[string]bool{}
	for _, s := range srcs {
		owned[s.Crawl] = true
	}
	names, err := crawl.List(sp)
	if err != nil {
		return fmt.Errorf("crawls: %w", err)
	}
	var cands []*crawl.Domain
	crawlOf := map[*crawl.Domain]string{}
	for _, n := range names {
		if owned[n] {
			continue
		}
		st, err := crawl.Open(sp, n)
		if err != nil {
			continue
		}
		cr, err := st.Load()
		if err != nil || cr.State == crawl.Cancelled {
			continue
		}
		doms, err := st.Domains()
		if err != nil {
			rep.Refresh = append(rep.Refresh, RefreshEntry{Crawl: n, Status: "error", Error: err.Error()})
			rep.Errors++
			continue
		}
		iv := o.RefreshInterval
		if cr.RefreshCooldown > 0 { // the crawl's own (--refresh-cooldown)
			iv = cr.RefreshCooldown.D()
		}
		for _, d := range doms {
			if crawl.RefreshDue(d, iv, o.Now) {
				cands = append(cands, d)
				crawlOf[d] = n
			}
		}
	}
	crawl.SortRefreshCandidates(cands)
	byCrawl := map[string][]int{} // crawl -> indexes into rep.Refresh
	var order []string
	i := 0 // refreshes planned or left
	for _, d := range cands {
		p := crawl.PriorityOf(d, o.Now)
		e := RefreshEntry{Crawl: crawlOf[d], Domain: d.Domain, YieldRate: p.YieldRate, LastCrawledAt: crawl.LastActivity(d), Score: p.Score, Status: "planned"}
		if why, _ := registryDefers(sp, d.Domain, o.Now); why != "" {
			e.Status, e.Deferred = "deferred", why
			rep.Refresh = append(rep.Refresh, e)
			continue
		}
		i++
		if o.MaxRefresh > 0 && i > o.MaxRefresh {
			e.Status = "left"
		} else if !o.DryRun {
			if _, ok := byCrawl[e.Crawl]; !ok {
				order = append(order, e.Crawl)
			}
			byCrawl[e.Crawl] = append(byCrawl[e.Crawl], len(rep.Refresh))
		}
		rep.Refresh = append(rep.Refresh, e)
	}
	for _, n := range order {
		idx := byCrawl[n]
		var doms []string
		for _, i := range idx {
			doms = append(doms, rep.Refresh[i].Domain)
		}
		st, _ := crawl.Open(sp, n)
		r, err := RequestRefresh(st, doms, o.Now, false)
		for _, i := range idx {
			switch why := r.Deferred[rep.Refresh[i].Domain]; {
			case err != nil:
				rep.Refresh[i].Status, rep.Refresh[i].Error = "error", err.Error()
				rep.Errors++
			case why != "":
				rep.Refresh[i].Status, rep.Refresh[i].Deferred = "deferred", why
			default:
				rep.Refresh[i].Status = "requested"
			}
		}
	}
	return nil
}
