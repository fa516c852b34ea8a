package crawl

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Exact counters (docs/CRAWL.md, "Counters"). Every counter a crawl shows
// is either kept in the domain file that also holds the cursors and the
// in-flight list it moves with (one atomic write), or derived from
// durable records: the queue segments, outcomes.jsonl and links.jsonl.
// Recount computes them all from those records alone, so that a test (or
// farroctl crawl fsck) can check what the frontier shows against them.

// LinksFile is links.jsonl: one line per ingested job that found links
// (a page, a robots.txt job's sitemaps, the seeds), with how its links
// fared. Lines are appended with the job's outcome, before the domain
// file that takes the job out of flight, so a job ingested again after a
// crash writes its line again: readers keep the last line of a job ID.
const LinksFile = "links.jsonl"

// SeedsTallyID is the job ID of the seeds' line in links.jsonl.
const SeedsTallyID = "seeds"

// LinkTally is one line of links.jsonl: how the links one job found were
// taken. Every field but Accepted is a drop that depends only on the link
// and the crawl's configuration, so an ingestion repeated after a crash
// writes the same line. Accepted links are new (queued) or duplicates;
// which ones depends on the seen-set, so duplicates are not tallied here
// but derived: accepted links minus URLs queued (Recount).
type LinkTally struct {
	JobID      string `json:"job_id"`
	Invalid    int64  `json:"invalid,omitempty"`
	OutOfScope int64  `json:"out_of_scope,omitempty"`
	Filtered   int64  `json:"filtered,omitempty"`
	TooDeep    int64  `json:"too_deep,omitempty"`
	TooManyHop int64  `json:"too_many_redirects,omitempty"`
	Accepted   int64  `json:"accepted,omitempty"`
}

// Empty reports whether the tally counts nothing.
func (t *LinkTally) Empty() bool {
	return t.Invalid == 0 && t.OutOfScope == 0 && t.Filtered == 0 && t.TooDeep == 0 && t.TooManyHop == 0 && t.Accepted == 0
}

// Add adds sign times u to t's counts.
func (t *LinkTally) Add(u *LinkTally, sign int64) {
	t.Invalid += sign * u.Invalid
	t.OutOfScope += sign * u.OutOfScope
	t.Filtered += sign * u.Filtered
	t.TooDeep += sign * u.TooDeep
	t.TooManyHop += sign * u.TooManyHop
	t.Accepted += sign * u.Accepted
}

// ScanLinkTallies returns the last line of every job ID of links.jsonl.
func (st *Store) ScanLinkTallies() (map[string]LinkTally, error) {
	out := map[string]LinkTally{}
	err := st.scanJSONLines(LinksFile, func(line []byte) bool {
		var t LinkTally
		if json.Unmarshal(line, &t) == nil && t.JobID != "" {
			out[t.JobID] = t
		}
		return true
	})
	return out, err
}

// SumLinkTallies adds the tallies up.
func SumLinkTallies(m map[string]LinkTally) LinkTally {
	var s LinkTally
	for _, t := range m {
		s.Add(&t, 1)
	}
	return s
}

// DomainCounts are a domain's counters.
type DomainCounts struct {
	Discovered   int64            `json:"pages_discovered"`
	Released     int64            `json:"pages_released"`
	Crawled      int64            `json:"pages_crawled"`
	Failed       int64            `json:"pages_failed"`
	RobotsDenied int64            `json:"robots_denied"`
	Refused      int64            `json:"refused"`
	New          int64            `json:"pages_new"`
	Unchanged    int64            `json:"pages_unchanged"`
	Recrawled    int64            `json:"pages_recrawled"`
	Pending      int64            `json:"pending"`
	Queued       int64            `json:"queued"` // queue entries appended, retries included
	InFlight     int              `json:"in_flight"`
	HTTPStatus   map[string]int64 `json:"http_status"`
	ImageCounts
}

// ImageCounts are a domain's image counters (images.go).
type ImageCounts struct {
	ImagesFound       int64 `json:"images_found"`
	ImagesStored      int64 `json:"images_stored"`
	RequisitesCrawled int64 `json:"requisites_crawled"`
}

// Counts are a crawl's counters: per domain, and the dropped links.
type Counts struct {
	Domains    map[string]*DomainCounts `json:"domains"`
	OutOfScope int64                    `json:"out_of_scope"`
	TooDeep    int64                    `json:"too_deep"`
	TooManyHop int64                    `json:"too_many_redirects"`
	Invalid    int64                    `json:"invalid"`
	Duplicates int64                    `json:"duplicates"`
	Filtered   int64                    `json:"filtered"`
}

// Stored returns the counters as the crawl's files show them now: the
// domain files and frontier.json (what farroctl crawl status prints).
func (st *Store) Stored() (*Counts, error) {
	doms, err := st.Domains()
	if err != nil {
		return nil, err
	}
	c := &Counts{Domains: map[string]*DomainCounts{}}
	for _, d := range doms {
		dc := &DomainCounts{Discovered: d.PagesDiscovered, Released: d.PagesReleased, Crawled: d.PagesCrawled,
			Failed: d.PagesFailed, RobotsDenied: d.RobotsDenied, Refused: d.Refused, New: d.PagesNew,
			Unchanged: d.PagesUnchanged, Recrawled: d.PagesRecrawled, Pending: d.Pending(), InFlight: len(d.InFlight), HTTPStatus: map[string]int64{}}
		for _, s := range d.Queue {
			dc.Queued += s.Count
		}
		dc.ImageCounts = ImageCounts{ImagesFound: d.ImagesFound, ImagesStored: d.ImagesStored, RequisitesCrawled: d.RequisitesCrawled}
		for k, v := range d.StatusCounts {
			if v != 0 {
				dc.HTTPStatus[k] = v
			}
		}
		c.Domains[d.Domain] = dc
	}
	fr, err := st.LoadFrontier()
	if err != nil {
		return nil, err
	}
	c.OutOfScope, c.TooDeep, c.TooManyHop, c.Invalid, c.Duplicates, c.Filtered = fr.OutOfScope, fr.TooDeep, fr.TooManyHop, fr.Invalid, fr.Duplicates, fr.Filtered
	return c, nil
}

// Recount computes the crawl's counters from its durable records only:
// discovered and pending from the queue segments' lines (and the cursors
// of the domain files, the only record of what was consumed), crawled,
// failed, robots-denied, refused, new, unchanged and the HTTP statuses
// from the last line of each job in outcomes.jsonl, released from the
// URL jobs those lines, the flights and the queued retries name, and the
// dropped links from links.jsonl. Run it on a crawl no frontier is
// driving (a running one moves on while it reads).
func Recount(st *Store) (*Counts, error) {
	doms, err := st.Domains()
	if err != nil {
		return nil, err
	}
	c := &Counts{Domains: map[string]*DomainCounts{}}
	get := func(name string) *DomainCounts {
		dc := c.Domains[name]
		if dc == nil {
			dc = &DomainCounts{HTTPStatus: map[string]int64{}}
			c.Domains[name] = dc
		}
		return dc
	}
	released := map[string]map[string]bool{} // domain -> base job IDs
	release := func(domain, id string) {
		if released[domain] == nil {
			released[domain] = map[string]bool{}
		}
		released[domain][BaseJobID(id)] = true
	}
	var discovered int64
	for _, d := range doms {
		dc := get(d.Domain)
		dc.InFlight = len(d.InFlight)
		for _, fl := range d.InFlight {
			if fl.Kind == KindFetch {
				release(d.Domain, fl.ID)
			}
		}
		for _, s := range d.Queue {
			es, _, err := ReadEntries(filepath.Join(st.QueueDir(d.Domain), s.File), 0, 1<<62)
			if err != nil {
				return nil, err
			}
			var n int64
			for _, e := range es {
				n++
				if e.URL == "" {
					continue
				}
				if e.Discovery() {
					dc.Discovered++
					discovered++
				}
				if n > s.Consumed {
					if e.Try > 0 { // a retry waiting: its URL was released
						release(d.Domain, RetryJobID(st.Name, e.URL, e.Round, 0))
					}
				}
			}
			dc.Queued += n
			dc.Pending += n - s.Consumed
		}
	}
	last := map[string]Outcome{}
	if err := st.ScanOutcomes(func(o *Outcome) bool {
		last[o.JobID] = *o
		return true
	}); err != nil {
		return nil, err
	}
	for _, o := range last {
		dc := get(o.Domain)
		switch o.Outcome {
		case OutcomeFetched:
			dc.Crawled++
			if o.Recrawl {
				dc.Recrawled++
			}
			dc.HTTPStatus[fmt.Sprint(o.HTTPStatus)]++
			recountImages(&o, dc, get) // images.go
			switch {
			case o.Unchanged:
				dc.Unchanged++
			case o.HTTPStatus >= 200 && o.HTTPStatus < 300:
				dc.New++
			}
		case OutcomeFailed, OutcomeKilled:
			dc.Failed++
		case OutcomeRobotsDenied:
			dc.RobotsDenied++
			continue // dropped at release: never released
		case OutcomeRefused, OutcomePrivateAddress:
			if o.ErrorCode == ErrCodeRobots {
				dc.RobotsDenied++
			} else {
				dc.Refused++
			}
		}
		release(o.Domain, o.JobID)
	}
	for name, ids := range released {
		get(name).Released = int64(len(ids))
	}
	tallies, err := st.ScanLinkTallies()
	if err != nil {
		return nil, err
	}
	sum := SumLinkTallies(tallies)
	c.OutOfScope, c.TooDeep, c.TooManyHop, c.Invalid, c.Filtered = sum.OutOfScope, sum.TooDeep, sum.TooManyHop, sum.Invalid, sum.Filtered
	c.Duplicates = sum.Accepted - discovered
	return c, nil
}

// BaseJobID is a URL job's ID without its retry suffix: the ID of the
// URL's first try in its round.
func BaseJobID(id string) string {
	if TryOf(id) == 0 {
		return id
	}
	return id[:strings.LastIndex(id, "-t")]
}

// Diff lists, one line each, the counters in which a and b differ (a
// named "stored", b "recount"); nil when they agree.
func (a *Counts) Diff(b *Counts) []string {
	var out []string
	cmp := func(what string, x, y int64) {
		if x != y {
			out = append(out, fmt.Sprintf("%s: stored %d, recount %d", what, x, y))
		}
	}
	names := map[string]bool{}
	for n := range a.Domains {
		names[n] = true
	}
	for n := range b.Domains {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	zero := &DomainCounts{}
	for _, n := range sorted {
		x, y := a.Domains[n], b.Domains[n]
		if x == nil {
			x = zero
		}
		if y == nil {
			y = zero
		}
		p := "domain " + n + " "
		cmp(p+"pages_discovered", x.Discovered, y.Discovered)
		cmp(p+"pages_released", x.Released, y.Released)
		cmp(p+"pages_crawled", x.Crawled, y.Crawled)
		cmp(p+"pages_failed", x.Failed, y.Failed)
		cmp(p+"robots_denied", x.RobotsDenied, y.RobotsDenied)
		cmp(p+"refused", x.Refused, y.Refused)
		cmp(p+"pages_new", x.New, y.New)
		cmp(p+"pages_unchanged", x.Unchanged, y.Unchanged)
		cmp(p+"pages_recrawled", x.Recrawled, y.Recrawled)
		cmp(p+"pending", x.Pending, y.Pending)
		cmp(p+"queued", x.Queued, y.Queued)
		cmp(p+"in_flight", int64(x.InFlight), int64(y.InFlight))
		cmp(p+"images_found", x.ImagesFound, y.ImagesFound)
		cmp(p+"images_stored", x.ImagesStored, y.ImagesStored)
		cmp(p+"requisites_crawled", x.RequisitesCrawled, y.RequisitesCrawled)
		codes := map[string]bool{}
		for k := range x.HTTPStatus {
			codes[k] = true
		}
		for k := range y.HTTPStatus {
			codes[k] = true
		}
		ks := make([]string, 0, len(codes))
		for k := range codes {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			cmp(p+"http_status "+k, x.HTTPStatus[k], y.HTTPStatus[k])
		}
	}
	cmp("out_of_scope", a.OutOfScope, b.OutOfScope)
	cmp("too_deep", a.TooDeep, b.TooDeep)
	cmp("too_many_redirects", a.TooManyHop, b.TooManyHop)
	cmp("invalid", a.Invalid, b.Invalid)
	cmp("duplicates", a.Duplicates, b.Duplicates)
	cmp("filtered", a.Filtered, b.Filtered)
	return out
}
