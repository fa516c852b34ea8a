package ctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// CrawlStartOptions are crawl start's flags: Crawl holds the configuration
// (defaults from crawl.New, overridden by the flags given), Seeds and
// SeedsFile the start URLs.
type CrawlStartOptions struct {
	Crawl     *crawl.Crawl
	Seeds     []string
	SeedsFile string // lines "URL [PRIORITY] [rank=N] [source=NAME]"; '#' starts a comment; "-" is stdin
	Resolve   []string
	// Rank is the seed rank of the Seeds URLs (1 the best, 0 none); Source
	// the source of every seed that names none of its own.
	Rank   int
	Source string
}

// CrawlStart creates a crawl; managerd's frontier picks it up.
func (c *Ctl) CrawlStart(o CrawlStartOptions) (err error) {
	defer func() {
		if o.Crawl != nil {
			c.auditDone(&err, "crawl start", o.Crawl.Name, "")
		}
	}()
	cr := o.Crawl
	if err := crawl.ValidateName(cr.Name); err != nil {
		return UsageError(err)
	}
	if err := checkRankSource(o.Rank, o.Source); err != nil {
		return err
	}
	for _, s := range o.Seeds {
		cr.Seeds = append(cr.Seeds, crawl.Seed{URL: s, Rank: o.Rank})
	}
	if o.SeedsFile != "" {
		seeds, err := c.readSeeds(o.SeedsFile)
		if err != nil {
			return err
		}
		cr.Seeds = append(cr.Seeds, seeds...)
	}
	for i := range cr.Seeds {
		if cr.Seeds[i].Source == "" {
			cr.Seeds[i].Source = o.Source
		}
	}
	if len(o.Resolve) > 0 && cr.Resolve == nil {
		cr.Resolve = map[string]string{}
	}
	for _, r := range o.Resolve {
		hp, addr, err := crawl.ParseResolve(r)
		if err != nil {
			return UsageError(err)
		}
		cr.Resolve[hp] = addr
	}
	if err := cr.Validate(); err != nil {
		return UsageError(err)
	}
	if err := checkPrivateSeeds(context.Background(), cr); err != nil {
		return err
	}
	s, err := c.open()
	if err != nil {
		return err
	}
	st, err := crawl.Open(s, cr.Name)
	if err != nil {
		return UsageError(err)
	}
	if err := st.Create(cr); err != nil {
		if errors.Is(err, crawl.ErrExists) {
			return fmt.Errorf("%w (crawl names are never reused: their job IDs would collide)", err)
		}
		return err
	}
	fmt.Fprintln(c.Stdout, cr.Name)
	return nil
}

func (c *Ctl) readSeeds(path string) ([]crawl.Seed, error) {
	var r io.Reader
	if path == "-" {
		r = c.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var out []crawl.Seed
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		seed, err := parseSeedLine(f)
		if err != nil {
			return nil, Usagef("%s line %d: %v", path, n, err)
		}
		out = append(out, seed)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// crawlStore opens an existing crawl.
func (c *Ctl) crawlStore(name string) (*job.Spool, *crawl.Store, *crawl.Crawl, error) {
	if err := crawl.ValidateName(name); err != nil {
		return nil, nil, nil, UsageError(err)
	}
	s, err := c.existing()
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := crawl.Open(s, name)
	if err != nil {
		return nil, nil, nil, UsageError(err)
	}
	cr, err := st.Load()
	if err != nil {
		return nil, nil, nil, err
	}
	return s, st, cr, nil
}

// CrawlList prints the crawls: a table, or JSON Lines of their status.
func (c *Ctl) CrawlList(jsonOut bool) error {
	sums, problems, err := c.CrawlsOf()
	if err != nil {
		return err
	}
	for _, p := range problems {
		c.warnf("%s", p)
	}
	if jsonOut {
		enc := json.NewEncoder(c.Stdout)
		for _, sum := range sums {
			if err := enc.Encode(sum); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tRUN\tDOMAINS\tDISCOVERED\tFETCHED\tFAILED\tPENDING\tIN-FLIGHT\tUPDATED")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Name, s.State, s.Run, s.Domains, s.Discovered, s.Fetched,
			s.Failed, s.Pending, s.InFlight, s.UpdatedAt.UTC().Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return pendingFooter(c.Stdout, sums) // crawl_pending.go
}

// CrawlPause stops the crawl's releases; jobs in flight finish.
func (c *Ctl) CrawlPause(name string) (err error) {
	defer c.auditDone(&err, "crawl pause", name, "")
	_, st, _, err := c.crawlStore(name)
	if err != nil {
		return err
	}
	already := false
	cr, err := st.Update(func(cr *crawl.Crawl) error {
		switch cr.State {
		case crawl.Paused:
			already = true
			return nil
		case crawl.Running:
			cr.State, cr.StateReason = crawl.Paused, "paused by operator"
			return nil
		}
		return fmt.Errorf("crawl %s is %s: cannot pause", name, cr.State)
	})
	if err != nil {
		return err
	}
	if already {
		fmt.Fprintf(c.Stdout, "%s: already paused\n", name)
		return nil
	}
	fmt.Fprintf(c.Stdout, "%s: running -> %s (jobs in flight finish; nothing more is released)\n", name, cr.State)
	return nil
}

// CrawlResume starts a new run of a paused (or done) crawl.
func (c *Ctl) CrawlResume(name string) (err error) {
	defer c.auditDone(&err, "crawl resume", name, "")
	_, st, _, err := c.crawlStore(name)
	if err != nil {
		return err
	}
	already := false
	var from crawl.State
	cr, err := st.Update(func(cr *crawl.Crawl) error {
		switch cr.State {
		case crawl.Running:
			already = true
			return nil
		case crawl.Paused, crawl.Done:
			// A done crawl may have work again: a domain reset, or URLs
			// held back by a per-domain budget of the last run.
			from = cr.State
			cr.StartRun(time.Now())
			return nil
		}
		return fmt.Errorf("crawl %s is %s: cannot resume", name, cr.State)
	})
	if err != nil {
		return err
	}
	if already {
		fmt.Fprintf(c.Stdout, "%s: already running\n", name)
		return nil
	}
	fmt.Fprintf(c.Stdout, "%s: %s -> running (run %d)\n", name, from, cr.Run)
	return nil
}

// CrawlCancel marks the crawl cancelled (so nothing more is released) and
// cancels its jobs: queued, deferred, held, failed and stale ones are
// killed ("cancelled"), running ones are asked to stop.
func (c *Ctl) CrawlCancel(name string) (err error) {
	defer c.auditDone(&err, "crawl cancel", name, "")
	s, st, _, err := c.crawlStore(name)
	if err != nil {
		return err
	}
	prev := crawl.State("")
	_, err = st.Update(func(cr *crawl.Crawl) error {
		prev = cr.State
		switch cr.State {
		case crawl.Cancelled:
			return nil
		case crawl.Done:
			return fmt.Errorf("crawl %s is done: nothing to cancel", name)
		}
		cr.State, cr.StateReason = crawl.Cancelled, "cancelled by operator"
		return nil
	})
	if err != nil {
		return err
	}
	// crawl.json is written under the exclusive crawl.lock, which every
	// release pass holds shared: every job released before is in the
	// job store now, and none will follow. The jobs are found, moved and
	// asked to stop through the job store.
	killed, asked, failed := 0, 0, 0
	jobs := spoolstore.New(s)
	ctx := context.Background()
	var ids []string
	err = jobs.List(ctx, store.Filter{States: []job.State{job.Queued, job.Deferred, job.Held, job.Failed, job.Stale, job.InProgress}},
		func(j *job.Job) error {
			if _, n, ok := crawl.ParseJobID(j.ID); ok && n == name {
				ids = append(ids, j.ID)
			}
			return nil
		})
	if err != nil {
		return err
	}
	for _, id := range ids {
		var out crawl.CancelOutcome
		var err error
		for try := 0; try < 50; try++ {
			out, err = crawl.CancelJob(ctx, jobs, id, Actor)
			// Busy (locked), or moved while we acted (its agent was
			// committing it): look it up again.
			if err == nil || errors.Is(err, job.ErrNotFound) || !(errors.Is(err, store.ErrBusy) || errors.Is(err, job.ErrState)) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		switch {
		case err != nil && errors.Is(err, job.ErrNotFound):
		case err != nil:
			failed++
			c.warnf("%s: %v", id, err)
		case out == crawl.CancelDone:
			killed++
		case out == crawl.CancelRequested:
			asked++
		}
	}
	if prev == crawl.Cancelled {
		fmt.Fprintf(c.Stdout, "%s: already cancelled; %d jobs killed, %d running jobs asked to stop\n", name, killed, asked)
	} else {
		fmt.Fprintf(c.Stdout, "%s: %s -> cancelled; %d jobs killed, %d running jobs asked to stop\n", name, prev, killed, asked)
	}
	if failed > 0 {
		return silent("%d jobs could not be cancelled", failed)
	}
	return nil
}

// crawlJobs lists the IDs of crawl name's jobs in the given states.
func crawlJobs(s *job.Spool, name string, states []job.State) ([]string, error) {
	es, err := walk(s, states)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range es {
		if e.Hostile {
			continue
		}
		if _, n, ok := crawl.ParseJobID(e.Name); ok && n == name {
			ids = append(ids, e.Name)
		}
	}
	return ids, nil
}

// CrawlExport prints one JSON line per URL the crawl finished: the
// artifact (result.json) when the job is still in the spool, else what
// the outcome log kept of it.
func (c *Ctl) CrawlExport(name string) error {
	s, st, _, err := c.crawlStore(name)
	if err != nil {
		return err
	}
	jobs := spoolstore.New(s)
	w := bufio.NewWriterSize(c.Stdout, 64<<10)
	enc := json.NewEncoder(w)
	done := map[string]bool{}
	var werr error
	err = st.ScanOutcomes(func(o *crawl.Outcome) bool {
		key := o.JobID
		if key == "" {
			key = o.URL
		}
		if done[key] {
			return true
		}
		done[key] = true
		if werr = enc.Encode(newExportRow(artifactOf(jobs, name, o), o)); werr != nil {
			return false
		}
		return true
	})
	if err == nil {
		err = werr
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// artifactOf is the fetch's result of outcome o: the artifact its
// finished job left in its directory (found through the job store), or,
// when there is none, one made of the outcome's own fields.
func artifactOf(jobs store.Dirs, name string, o *crawl.Outcome) *crawl.Artifact {
	if o.JobID != "" && o.Outcome != crawl.OutcomeRobotsDenied {
		_, loc, _ := jobs.GetDir(context.Background(), o.JobID, job.Succeeded)
		var a crawl.Artifact
		if (loc.State == job.Succeeded || loc.State == job.Killed) && crawl.ReadResult(loc.Dir, &a) == nil {
			if o.Outcome != crawl.OutcomeFetched {
				a.Outcome = o.Outcome
			}
			return &a
		}
	}
	a := &crawl.Artifact{Kind: crawl.KindFetch, Crawl: name, JobID: o.JobID, NormalizedURL: o.URL, FinalURL: o.URL, Domain: o.Domain,
		Depth: o.Depth, Outcome: o.Outcome, HTTPStatus: o.HTTPStatus, SHA256: o.SHA256, Error: o.Detail, Links: nil}
	a.PageDirectives = o.PageDirectives // noindex, nofollow
	if o.FetchedAt != nil {
		a.FetchedAt = *o.FetchedAt
	}
	return a
}

// parseSeedLine reads the fields of one seeds-file line: "URL [PRIORITY]
// [rank=N] [source=NAME]", the key=value fields in any order after the
// URL.
func parseSeedLine(f []string) (crawl.Seed, error) {
	const want = `want "URL [PRIORITY] [rank=N] [source=NAME]"`
	s := crawl.Seed{URL: f[0]}
	havePrio := false
	for _, field := range f[1:] {
		k, v, kv := strings.Cut(field, "=")
		switch {
		case !kv && !havePrio:
			p, err := strconv.Atoi(field)
			if err != nil {
				return s, fmt.Errorf("priority %q is not an integer (%s)", field, want)
			}
			s.Priority, havePrio = p, true
		case kv && k == "rank" && s.Rank == 0:
			r, err := strconv.Atoi(v)
			if err != nil || r < 1 {
				return s, fmt.Errorf("rank %q: want an integer of 1 or more", v)
			}
			s.Rank = r
		case kv && k == "source" && s.Source == "":
			if v == "" || !crawl.ValidSeedSource(v) {
				return s, fmt.Errorf("source %q: want 1 to %d printable characters", v, crawl.MaxSourceLen)
			}
			s.Source = v
		default:
			return s, fmt.Errorf("%q: %s", field, want)
		}
	}
	return s, nil
}

// checkRankSource checks the --rank and --source of a command that adds
// seeds.
func checkRankSource(rank int, source string) error {
	if rank < 0 {
		return Usagef("--rank %d: want 1 or more (the best rank is 1)", rank)
	}
	if !crawl.ValidSeedSource(source) {
		return Usagef("--source %q: at most %d printable characters, no spaces", source, crawl.MaxSourceLen)
	}
	return nil
}
