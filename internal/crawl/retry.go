package crawl

import (
	"strconv"
	"strings"
	"time"
)

// Outage policy (docs/CRAWL.md, "Outages"): a URL's network failure or
// 5xx answer is tried again by the frontier, not by managerd, after a wait
// measured against its domain's current error streak.

// Defaults of the retry schedule (crawl.json retry_backoff and
// retry_backoff_max; 0 means these).
const (
	DefaultRetryBackoff    = 2 * time.Second
	DefaultRetryBackoffMax = 5 * time.Minute
	// DefaultURLAttempts is a URL's attempts while its domain answers
	// (crawl.json max_attempts 0).
	DefaultURLAttempts = 3
)

// RetryBackoffD is the crawl's first retry wait.
func (c *Crawl) RetryBackoffD() time.Duration {
	if c.RetryBackoff > 0 {
		return c.RetryBackoff.D()
	}
	return DefaultRetryBackoff
}

// RetryBackoffMaxD is the crawl's longest retry wait.
func (c *Crawl) RetryBackoffMaxD() time.Duration {
	if c.RetryBackoffMax > 0 {
		return max(c.RetryBackoffMax.D(), c.RetryBackoffD())
	}
	return max(DefaultRetryBackoffMax, c.RetryBackoffD())
}

// URLAttempts is how many failed attempts of one URL (while its domain
// is not judged down) end it as failed.
func (c *Crawl) URLAttempts() int {
	if c.MaxAttempts > 0 {
		return c.MaxAttempts
	}
	return DefaultURLAttempts
}

// RetryDelay is how long a domain waits before its next request after
// its streak-th consecutive failure: exponential, cap =
// min(max, base*2^(streak-1)), with "equal jitter": a random duration in
// [cap/2, cap], so that the schedule really grows (seconds, then minutes)
// while domains failing together do not retry in step. rnd(n) returns a
// number in [0, n).
func RetryDelay(base, max time.Duration, streak int, rnd func(int64) int64) time.Duration {
	if base <= 0 {
		return 0
	}
	if max < base {
		max = base
	}
	c := base
	for i := 1; i < streak && c < max; i++ {
		if c > max/2 {
			c = max
			break
		}
		c *= 2
	}
	if c > max {
		c = max
	}
	half := c / 2
	return half + time.Duration(rnd(int64(c-half)+1))
}

// RetryJobID is the ID of the try-th retry of u's fetch in round round:
// RoundJobID, then "-t<try>" for try > 0. The suffix ends in no hex
// digit position ParseJobID could mistake for the URL hash.
func RetryJobID(name, u string, round, try int) string {
	id := RoundJobID(name, u, round)
	if try <= 0 {
		return id
	}
	return id + "-t" + strconv.Itoa(try)
}

// stripTry removes a retry suffix "-t<n>"; a suffix with a leading zero
// is no ID of ours.
func stripTry(rest string) (string, bool) {
	i := strings.LastIndex(rest, "-t")
	if i < 0 || !isDigits(rest[i+2:]) {
		return rest, true
	}
	if rest[i+2] == '0' {
		return "", false
	}
	return rest[:i], true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// OpRetry asks the frontier to queue a crawl's failed URLs again
// (farroctl crawl retry): Request.States and, if set, Request.Domain
// choose them.
const OpRetry = "retry"

// RetryStates are the last outcomes crawl retry takes back.
var RetryStates = []string{OutcomeFailed, OutcomeKilled}

// TryOf is the retry number in a crawl.fetch job ID (0 without one).
func TryOf(id string) int {
	i := strings.LastIndex(id, "-t")
	if i < 0 || !isDigits(id[i+2:]) {
		return 0
	}
	n, err := strconv.Atoi(id[i+2:])
	if err != nil {
		return 0
	}
	return n
}

// FailedURLs calls fn with the last outcome line of every URL whose last
// outcome is one of states (and whose domain is domain, if not empty), in
// file order. Memory: one map entry per URL key of the crawl (not its
// URL), for the length of the call.
func (st *Store) FailedURLs(states []string, domain string, fn func(o *Outcome)) error {
	want := map[string]bool{}
	for _, s := range states {
		want[s] = true
	}
	last := map[uint64]int{} // URL key -> line number of its last outcome
	n := 0
	err := st.ScanOutcomes(func(o *Outcome) bool {
		last[URLKey(o.URL)] = n
		n++
		return true
	})
	if err != nil {
		return err
	}
	n = 0
	return st.ScanOutcomes(func(o *Outcome) bool {
		i := n
		n++
		if last[URLKey(o.URL)] != i || !want[o.Outcome] || (domain != "" && o.Domain != domain) {
			return true
		}
		fn(o)
		return true
	})
}
