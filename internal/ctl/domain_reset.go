package ctl

import (
	"fmt"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// resetDetail is the reason detail a reset leaves on the domain.
func resetDetail(reason string) string {
	if reason == "" {
		return ""
	}
	return "by " + Actor + ": " + reason
}

// recrawl writes the recrawl request of a domain reset (unless
// NoRecrawl) and says what follows. Its time is just after the reset's,
// so that the frontier, which applies requests in the order of their
// file names (their times), resets the domain first. The frontier applies
// it when it next drives the crawl: at once for a running or paused crawl
// (a paused one releases the round's URLs on resume), on resume for a
// done one.
func recrawl(st *crawl.Store, cr *crawl.Crawl, dn string, o DomainResetOptions, at time.Time) (string, error) {
	if o.NoRecrawl {
		return "; pages already fetched are not fetched again", nil
	}
	if _, err := st.PutRequest(crawl.Request{Op: crawl.OpRecrawl, Domain: dn, Actor: Actor, Reason: o.Reason, RequestedAt: at.Add(time.Microsecond)}); err != nil {
		return "; its recrawl could not be requested", fmt.Errorf("%s: recrawl request: %w", dn, err)
	}
	switch cr.State {
	case crawl.Done:
		return fmt.Sprintf("; its pages are fetched again once the crawl is resumed (farroctl crawl resume %s)", cr.Name), nil
	case crawl.Paused:
		return "; its pages are fetched again (the crawl is paused: after farroctl crawl resume)", nil
	case crawl.Cancelled:
		return "; the crawl is cancelled: nothing is fetched again", nil
	}
	return "; its pages are fetched again", nil
}
