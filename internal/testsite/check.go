package testsite

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/domain"
)

// DomainOfHost is the canonical domain of a host of the site (www. folded).
func DomainOfHost(host string) string {
	d, err := domain.Canonical(host)
	if err != nil {
		return host
	}
	return d
}

// ByDomain groups the log by canonical domain, in arrival order.
func ByDomain(log []Request) map[string][]Request {
	out := map[string][]Request{}
	for _, r := range log {
		d := DomainOfHost(r.Host)
		out[d] = append(out[d], r)
	}
	for _, rs := range out {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Start.Before(rs[j].Start) })
	}
	return out
}

// MaxInFlight returns, per domain, the most requests the server was
// handling at once.
func MaxInFlight(log []Request) map[string]int {
	out := map[string]int{}
	for d, rs := range ByDomain(log) {
		type ev struct {
			t     time.Time
			delta int
		}
		var evs []ev
		for _, r := range rs {
			evs = append(evs, ev{r.Start, 1}, ev{r.End, -1})
		}
		// Ends before starts at the same instant.
		sort.Slice(evs, func(i, j int) bool {
			if evs[i].t.Equal(evs[j].t) {
				return evs[i].delta < evs[j].delta
			}
			return evs[i].t.Before(evs[j].t)
		})
		cur, peak := 0, 0
		for _, e := range evs {
			cur += e.delta
			peak = max(peak, cur)
		}
		out[d] = peak
	}
	return out
}

// Gap is two consecutive requests to one domain closer than allowed.
type Gap struct {
	Domain     string
	A, B       Request
	Gap, Limit time.Duration
}

func (g Gap) String() string {
	return fmt.Sprintf("%s: %s%s then %s%s %.1fms apart (limit %s; handler entries %.1fms apart)", g.Domain, g.A.Host, g.A.URI, g.B.Host, g.B.URI,
		float64(g.Gap)/float64(time.Millisecond), g.Limit, float64(g.B.Entry.Sub(g.A.Entry))/float64(time.Millisecond))
}

// CloseGaps lists consecutive arrivals at one domain closer than
// interval(domain) - tolerance.
func CloseGaps(log []Request, interval func(domain string) time.Duration, tolerance time.Duration) []Gap {
	var out []Gap
	for d, rs := range ByDomain(log) {
		lim := interval(d)
		for i := 1; i < len(rs); i++ {
			g := rs[i].Start.Sub(rs[i-1].Start)
			if g < lim-tolerance {
				out = append(out, Gap{Domain: d, A: rs[i-1], B: rs[i], Gap: g, Limit: lim})
			}
		}
	}
	return out
}

// Counts maps host+URI to the number of requests.
func Counts(log []Request) map[string]int {
	out := map[string]int{}
	for _, r := range log {
		out[r.Host+r.URI]++
	}
	return out
}

// IsRobots tells whether a request is one of a robots job's: for a
// robots.txt (or a redirect of one) or for a sitemap.
func IsRobots(r Request) bool {
	return strings.HasSuffix(r.URI, "robots.txt") || strings.Contains(r.URI, "sitemap")
}
