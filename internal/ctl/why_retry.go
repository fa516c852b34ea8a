package ctl

import (
	"context"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/store"
)

// maxWhyTries bounds the retry jobs why looks for.
const maxWhyTries = 1000

// latestFetchJob is the ID of the last job released for u: the frontier
// retries a failed fetch as a new job ("-t<n>", crawl.RetryJobID).
func latestFetchJob(ctx context.Context, jobs store.Dirs, name, u string) string {
	id := crawl.FetchJobID(name, u)
	for try := 1; try <= maxWhyTries; try++ {
		next := crawl.RetryJobID(name, u, 0, try)
		if _, loc, _ := jobs.GetDir(ctx, next, ""); loc.State == "" {
			break // no such job (found nowhere)
		}
		id = next
	}
	return id
}

// requeuedWhy answers for a URL whose last job was killed but which is
// back in its domain's queue (a retry after a failure, or crawl retry).
func requeuedWhy(a *WhyAnswer, st *crawl.Store, cr *crawl.Crawl, u string, now time.Time) bool {
	w := *a
	waitingWhy(&w, st, cr, u, now)
	if w.Verdict == WhyUnaccounted {
		return false
	}
	w.Message += " (queued again after job " + a.JobID + ")"
	*a = w
	return true
}
