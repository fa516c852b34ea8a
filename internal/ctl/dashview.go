package ctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/pgstore"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// This file gives the read side of farroctl's commands as values rather
// than printed text, for farroctl serve (internal/dashboard): the same
// functions stats, stats --ages, ls, show, history, logs, top, agents,
// events, crawl ls/status and crawl why use, so the dashboard has no
// reader of the spool's files of its own.

// On a PostgreSQL store (OnStore) each reads the database through the
// CLI's store paths (store.go, pgops.go, servestore.go); the crawls and a
// job's output, kept in a spool only, are ErrSpoolOnly errors saying
// where they are instead.

// Spool returns the spool at Root, which must exist (as every reading
// command requires).
func (c *Ctl) Spool() (*job.Spool, error) { return c.existing() }

// StatsOf is stats --json's document.
func (c *Ctl) StatsOf() (*Stats, error) {
	if c.OnStore() {
		return c.storeCount()
	}
	s, err := c.existing()
	if err != nil {
		return nil, err
	}
	return Count(s, c.now())
}

// Shape is stats --ages with the kinds: for every state the age buckets
// of its jobs and how many jobs of each kind it holds. It reads every
// job.json.
type Shape struct {
	Ages  map[job.State]*StateAges     `json:"ages"`
	Kinds map[job.State]map[string]int `json:"kinds"` // "" for an unreadable job
	At    time.Time                    `json:"at"`
}

// ShapeOf computes the spool's Shape as of now (stats --ages' pass).
func (c *Ctl) ShapeOf() (*Shape, error) {
	if c.OnStore() {
		return c.storeShape()
	}
	s, err := c.existing()
	if err != nil {
		return nil, err
	}
	return shapeOf(s, c.now())
}

// WorkersOf is top --json's workers and daemons: every live agent and
// every agent directory holding jobs, with those jobs (kind, attempt,
// last heartbeat). It lists in-progress/ only (not the whole spool).
func (c *Ctl) WorkersOf() (TopDoc, error) {
	if c.OnStore() {
		return c.storeWorkers()
	}
	s, err := c.existing()
	if err != nil {
		return TopDoc{}, err
	}
	es, err := walk(s, []job.State{job.InProgress})
	if err != nil {
		return TopDoc{}, err
	}
	snap := spoolview.Snapshot{At: c.now(), States: map[job.State]int{}}
	for _, e := range es {
		if !e.Hostile && e.Agent != "" {
			snap.Running = append(snap.Running, spoolview.RunningJob{Agent: e.Agent, ID: e.Name})
		}
	}
	return topDoc(s, snap, nil), nil
}

// AgentsOf is agents --json's document.
func (c *Ctl) AgentsOf() (registry.Listing, error) {
	if c.OnStore() {
		l, _, err := c.storeAgents()
		return l, err
	}
	s, err := c.existing()
	if err != nil {
		return registry.Listing{}, err
	}
	return registry.List(s)
}

// JobQuery selects a page of jobs (farroctl serve's job list).
type JobQuery struct {
	States []job.State       // none: every state
	Kind   string            // exact kind ("": any)
	MinAge time.Duration     // in its state at least this long (AgeSince)
	Text   string            // in the ID, the reason or the error
	Newest bool              // newest IDs first (IDs sort by creation time)
	Offset int               // matches skipped
	Limit  int               // rows returned (default 50)
	Now    time.Time         // for MinAge (zero: now)
	Read   func(path string) // called for each job.json read (tests count them)
}

// JobPage is one page of a JobQuery.
type JobPage struct {
	Rows []Row `json:"rows"`
	// Listed counts the entries of the selected states' listings, before
	// the filters.
	Listed int `json:"listed"`
	// Matched counts the matches when it is known without reading every
	// job.json (no Kind, MinAge or Text on reasons): Exact tells.
	Matched int  `json:"matched"`
	Exact   bool `json:"exact"`
	More    bool `json:"more"` // there is a next page
	// JobFilesRead counts the job.json files read for this page.
	JobFilesRead int `json:"job_files_read"`
}

// JobsPage lists the selected states (directory listings only), sorts the
// entries by ID, and reads job.json only for what it shows: the page
// itself, or, when a filter needs job.json (Kind, MinAge, Text that is
// not in the ID), the entries in order until the page is full.
func (c *Ctl) JobsPage(q JobQuery) (*JobPage, error) {
	if q.Limit <= 0 {
		q.Limit = 50
	}
	if q.Offset < 0 {
		q.Offset = 0
	}
	if q.Now.IsZero() {
		q.Now = c.now()
	}
	if c.OnStore() {
		return c.storeJobsPage(q)
	}
	s, err := c.existing()
	if err != nil {
		return nil, err
	}
	es, err := walk(s, q.States)
	if err != nil {
		return nil, err
	}
	p := &JobPage{Listed: len(es), Rows: []Row{}}
	sort.SliceStable(es, func(a, b int) bool {
		if q.Newest {
			return es[a].Name > es[b].Name
		}
		return es[a].Name < es[b].Name
	})
	lim := newLimits(s)
	paused := pausedKinds(s.Root)
	read := func(e entry) Row {
		if !e.Hostile {
			p.JobFilesRead++
			if q.Read != nil {
				q.Read(filepath.Join(e.Path, job.JobFile))
			}
		}
		r := row(e, lim)
		r.KindPaused = r.Location == job.Queued && r.Status == job.Queued && paused[r.Kind]
		return r
	}
	text := strings.ToLower(q.Text)
	if q.Kind == "" && q.MinAge <= 0 {
		// The ID alone decides, except for text found only in a reason:
		// with text, entries whose ID lacks it need their job.json.
		var byID []entry
		for _, e := range es {
			if text == "" || strings.Contains(strings.ToLower(e.Name), text) {
				byID = append(byID, e)
			}
		}
		if text == "" {
			p.Matched, p.Exact = len(byID), true
			end := min(len(byID), q.Offset+q.Limit)
			for i := min(q.Offset, end); i < end; i++ {
				p.Rows = append(p.Rows, read(byID[i]))
			}
			p.More = end < len(byID)
			return p, nil
		}
	}
	// Read in order until the page and one more match are found.
	matched := 0
	for _, e := range es {
		if q.Kind == "" && q.MinAge <= 0 && strings.Contains(strings.ToLower(e.Name), text) {
			// matched by its ID; read only if shown
			if matched >= q.Offset && len(p.Rows) < q.Limit {
				p.Rows = append(p.Rows, read(e))
			} else if len(p.Rows) >= q.Limit {
				p.More = true
				break
			}
			matched++
			continue
		}
		if e.Hostile {
			continue // no job.json to match (shown above when its name matches)
		}
		r := read(e)
		if !rowMatches(r, q, text) {
			continue
		}
		if len(p.Rows) >= q.Limit {
			p.More = true
			break
		}
		if matched >= q.Offset {
			p.Rows = append(p.Rows, r)
		}
		matched++
	}
	p.Matched = matched
	return p, nil
}

func rowMatches(r Row, q JobQuery, text string) bool {
	if q.Kind != "" && r.Kind != q.Kind {
		return false
	}
	if q.MinAge > 0 {
		if r.UpdatedAt == nil {
			return false
		}
		since := *r.UpdatedAt
		if r.Status == job.InProgress {
			if j, err := job.ReadJob(r.Dir); err == nil && j.StartedAt != nil {
				since = *j.StartedAt
			}
		}
		if q.Now.Sub(since) < q.MinAge {
			return false
		}
	}
	if text != "" {
		hay := strings.ToLower(r.ID + "\x00" + r.Reason + "\x00" + r.Error + "\x00" + r.Problem)
		if !strings.Contains(hay, text) {
			return false
		}
	}
	return true
}

// ShowOf is show's document for id (exact ID or unique prefix). A job
// that cannot be found is an error; one found but unreadable is a
// document with its Problem (and a nil Job).
func (c *Ctl) ShowOf(id string) (*ShowDoc, error) {
	if err := job.ValidateID(id); err != nil {
		return nil, UsageError(err)
	}
	if c.OnStore() {
		doc, err := c.storeShow(id)
		if err != nil {
			return nil, err
		}
		return &doc, nil
	}
	s, err := c.existing()
	if err != nil {
		return nil, err
	}
	if id, err = c.resolveOne(s, id); err != nil {
		return nil, err
	}
	doc, _, err := c.showSettled(s, id)
	if err != nil {
		return nil, err
	}
	return &doc, nil
}

// MaxHistorySize bounds a job's events.jsonl when it is read (history,
// serve): a job's transitions are a few hundred bytes each.
const MaxHistorySize = 16 << 20

// HistoryEntry is one line of a job's events.jsonl as history shows it;
// Bad holds a line that could not be parsed (a torn last line).
type HistoryEntry struct {
	job.Event
	Line int    `json:"line"`
	Bad  string `json:"bad,omitempty"`
}

// HistoryOf reads the transitions of job id (exact ID or unique prefix)
// from its events.jsonl, as history prints them.
func (c *Ctl) HistoryOf(id string) ([]HistoryEntry, error) {
	data, _, err := c.historyData(id)
	if err != nil {
		return nil, err
	}
	return parseHistory(data), nil
}

// historyData locates job id and reads its events.jsonl (capped, never
// blocking on what is planted there).
func (c *Ctl) historyData(id string) ([]byte, string, error) {
	if err := job.ValidateID(id); err != nil {
		return nil, "", UsageError(err)
	}
	if c.OnStore() {
		return c.storeHistory(id)
	}
	s, err := c.existing()
	if err != nil {
		return nil, "", err
	}
	if id, err = c.resolveOne(s, id); err != nil {
		return nil, "", err
	}
	locs, err := s.LocateSettled(id, Actor)
	if err != nil {
		return nil, "", err
	}
	if len(locs) > 1 {
		return nil, "", fmt.Errorf("%s: found in %d places; run farroctl fsck", id, len(locs))
	}
	data, err := fsq.ReadFileCapped(filepath.Join(locs[0].Dir, job.EventsFile), MaxHistorySize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("%s: no %s in %s", id, job.EventsFile, relPath(s, locs[0].Dir))
		}
		return nil, "", fmt.Errorf("%s: %s: %w", id, job.EventsFile, err)
	}
	return data, id, nil
}

func parseHistory(data []byte) []HistoryEntry {
	var out []HistoryEntry
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev job.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			out = append(out, HistoryEntry{Line: i + 1, Bad: truncate(oneLine(string(line)), 40)})
			continue
		}
		out = append(out, HistoryEntry{Event: ev, Line: i + 1})
	}
	return out
}

// OutputTail is the end of one stream of one attempt's output.
type OutputTail struct {
	Attempt   int    `json:"attempt"`
	Stream    string `json:"stream"`
	Size      int64  `json:"size"`
	Tail      string `json:"tail"`      // the last bytes (at most the cap)
	Truncated bool   `json:"truncated"` // the file is longer than Tail
	Problem   string `json:"problem,omitempty"`
}

// OutputOf returns the tail (at most max bytes) of each stream of each
// attempt of job id's output, oldest attempt first: logs' files, opened
// as logs opens them (regular files only, never blocking). On a
// database it is an ErrSpoolOnly error naming where the output is.
func (c *Ctl) OutputOf(id string, max int64) ([]OutputTail, error) {
	if err := job.ValidateID(id); err != nil {
		return nil, UsageError(err)
	}
	if c.OnStore() {
		return nil, c.storeOutput(id)
	}
	s, err := c.existing()
	if err != nil {
		return nil, err
	}
	if id, err = c.resolveOne(s, id); err != nil {
		return nil, err
	}
	locs, err := s.LocateSettled(id, Actor)
	if err != nil {
		return nil, err
	}
	dir := locs[0].Dir
	have, err := job.OutputAttempts(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	var out []OutputTail
	streams := []string{job.Stdout, job.Stderr}
	for _, a := range have {
		_, files, sizes, _, err := openLogs(dir, a, streams)
		if err != nil {
			out = append(out, OutputTail{Attempt: a, Problem: oneLine(err.Error())})
			continue
		}
		for i, f := range files {
			if f == nil {
				continue
			}
			t := OutputTail{Attempt: a, Stream: streams[i], Size: sizes[i]}
			off := max64(0, sizes[i]-max)
			buf := make([]byte, sizes[i]-off)
			n, err := f.ReadAt(buf, off)
			if err != nil && !errors.Is(err, io.EOF) {
				t.Problem = oneLine(err.Error())
			}
			t.Tail, t.Truncated = string(buf[:n]), off > 0
			out = append(out, t)
		}
		closeAll(files)
	}
	return out, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// EventTail reads the event stream incrementally, as events --follow
// does: each Next returns the lines appended since the previous one (the
// first, the lines newer than the tail's since), reading only the new
// bytes of the last two segments. Not safe for concurrent use.
type EventTail struct {
	r     *eventsReader
	lines []job.StreamLine

	// on a database (storeTail): the feed, read on c's pool
	c    *Ctl
	feed *pgstore.Feed
}

// TailEvents starts a tail of the stream at the lines newer than since.
func (c *Ctl) TailEvents(since time.Duration) (*EventTail, error) {
	if c.OnStore() {
		return c.storeTail(since)
	}
	s, err := c.existing()
	if err != nil {
		return nil, err
	}
	t := &EventTail{r: &eventsReader{s: s, o: EventsOptions{Since: since, Follow: true}, offset: map[string]int64{}, since: c.now().Add(-since)}}
	t.r.emit = func(_ []byte, l *job.StreamLine) error {
		t.lines = append(t.lines, *l)
		return nil
	}
	return t, nil
}

// Next returns the lines appended since the last call, and how many
// unreadable lines were skipped in all.
func (t *EventTail) Next() ([]job.StreamLine, int, error) {
	if t.feed != nil {
		return t.nextFromStore(nil)
	}
	t.lines = nil
	err := t.r.pass(false) // a line being written is read whole next time
	return t.lines, t.r.bad, err
}

// CrawlsOf is crawl ls --json's summaries; a crawl that cannot be read
// is reported in problems. On a database it is ErrSpoolOnly.
func (c *Ctl) CrawlsOf() (sums []*CrawlSummary, problems []string, err error) {
	if c.OnStore() {
		return nil, nil, errCrawlsSpoolOnly
	}
	s, err := c.existing()
	if err != nil {
		return nil, nil, err
	}
	names, err := crawl.List(s)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range names {
		st, _ := crawl.Open(s, n)
		sum, err := summarize(st, false, c.now())
		if err != nil {
			problems = append(problems, fmt.Sprintf("crawl %s: %v", n, err))
			continue
		}
		sums = append(sums, sum)
	}
	return sums, problems, nil
}

// CrawlOf is crawl status --json's summary (with the domain table) and
// the crawl's configuration (its budgets, delays). On a database it is
// ErrSpoolOnly.
func (c *Ctl) CrawlOf(name string) (*CrawlSummary, *crawl.Crawl, error) {
	if c.OnStore() {
		return nil, nil, errCrawlsSpoolOnly
	}
	_, st, cr, err := c.crawlStore(name)
	if err != nil {
		return nil, nil, err
	}
	sum, err := summarize(st, true, c.now())
	if err != nil {
		return nil, nil, err
	}
	return sum, cr, nil
}

// WhyOf is crawl why --json's answer.
func (c *Ctl) WhyOf(name, rawURL string) (*WhyAnswer, error) {
	if c.OnStore() {
		return nil, errCrawlsSpoolOnly
	}
	s, st, cr, err := c.crawlStore(name)
	if err != nil {
		return nil, err
	}
	return why(spoolstore.New(s), st, cr, rawURL, c.now()), nil
}

// Applies reports whether action a can be asked of a job in state st
// (the states the action takes jobs from; a running job for the actions
// that reach it through control.json).
func Applies(a Action, st job.State) bool {
	r, ok := rules[a]
	if !ok {
		return false
	}
	if st == job.InProgress {
		return r.control != ""
	}
	return contains(r.from, st)
}
