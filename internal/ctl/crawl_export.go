package ctl

import (
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// exportRow is one line of `farroctl crawl export`: the URL's artifact,
// with fetched_at only where a request was made (a URL dropped by
// robots.txt or refused by the fetcher has none), and the referrer (the
// page the URL was found on, "" for a seed) and depth on every row.
type exportRow struct {
	*crawl.Artifact
	FetchedAt *time.Time `json:"fetched_at,omitempty"` // hides Artifact.FetchedAt
	Referrer  string     `json:"referrer"`
}

func newExportRow(a *crawl.Artifact, o *crawl.Outcome) *exportRow {
	r := &exportRow{Artifact: a, Referrer: o.Referrer}
	switch a.Outcome {
	case crawl.OutcomeRobotsDenied, crawl.OutcomeRefused, crawl.OutcomePrivateAddress:
		// Nothing was sent: the artifact's time is when it was refused.
	default:
		if !a.FetchedAt.IsZero() {
			t := a.FetchedAt
			r.FetchedAt = &t
		}
	}
	return r
}
