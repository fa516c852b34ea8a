package fetch

import (
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/tally"
)

// count records one crawl.fetch attempt of crawl art.Crawl (opened, so an
// existing crawl) in agentd's metrics: a page by
// status class and its body bytes, a network failure (status 0), or a URL
// robots.txt kept us from fetching. Other refusals (bad URL, private
// address) are not fetches and are not counted.
func count(art *crawl.Artifact) {
	switch {
	case art.Outcome == crawl.OutcomeFetched:
		tally.CrawlFetched(art.Crawl, art.HTTPStatus, art.BodyBytes)
	case art.Outcome == crawl.OutcomeNetworkError:
		tally.CrawlFetched(art.Crawl, 0, 0)
	case art.Outcome == crawl.OutcomeRefused && art.ErrorCode == crawl.ErrCodeRobots:
		tally.CrawlRobotsDenied(art.Crawl)
	}
}
