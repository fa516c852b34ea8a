package ctl

import (
	"fmt"
	"io"

	"github.com/farro-dev/farro/internal/crawl"
)

// pendingFooter prints crawl ls's footer: the URLs pending across the
// running crawls (and the paused ones apart), from each crawl's
// frontier.json, where the frontier keeps the count (pending_urls)
// current: one small file a crawl, however many domains it has.
func pendingFooter(w io.Writer, sums []*CrawlSummary) error {
	if len(sums) == 0 {
		return nil
	}
	var running, paused int64
	nr, np := 0, 0
	for _, s := range sums {
		switch s.State {
		case crawl.Running:
			running += s.PendingURLs
			nr++
		case crawl.Paused:
			paused += s.PendingURLs
			np++
		}
	}
	_, err := fmt.Fprintf(w, "pending URLs: %d in %d running crawl(s); %d more in %d paused\n", running, nr, paused, np)
	return err
}
