package fetch

import (
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/metrics"
)

// crawlFigures reads agentd's crawl metrics: pages by class, bytes, robots denials.
func crawlFigures(t *testing.T) (map[string]float64, float64, float64) {
	t.Helper()
	mfs, err := metrics.Registry(metrics.Agentd).Gather()
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]float64{}
	var bytes, denied float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "farro_crawl_pages_total":
				pages[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			case "farro_crawl_bytes_total":
				bytes = m.GetCounter().GetValue()
			case "farro_crawl_robots_denied_total":
				denied = m.GetCounter().GetValue()
			}
		}
	}
	return pages, bytes, denied
}

func TestCountFeedsCrawlMetrics(t *testing.T) {
	p0, b0, d0 := crawlFigures(t)
	count(&crawl.Artifact{Outcome: crawl.OutcomeFetched, HTTPStatus: 200, BodyBytes: 1000})
	count(&crawl.Artifact{Outcome: crawl.OutcomeFetched, HTTPStatus: 503, BodyBytes: 10})
	count(&crawl.Artifact{Outcome: crawl.OutcomeNetworkError})
	count(&crawl.Artifact{Outcome: crawl.OutcomeRefused, ErrorCode: crawl.ErrCodeRobots})
	count(&crawl.Artifact{Outcome: crawl.OutcomeRefused, ErrorCode: crawl.ErrCodeBadURL})
	p1, b1, d1 := crawlFigures(t)
	want := map[string]float64{"2xx": 1, "5xx": 1, "network_error": 1, "4xx": 0}
	for class, n := range want {
		if p1[class]-p0[class] != n {
			t.Errorf("pages{class=%q} moved by %v, want %v", class, p1[class]-p0[class], n)
		}
	}
	if b1-b0 != 1010 || d1-d0 != 1 {
		t.Errorf("bytes moved by %v (want 1010), robots denials by %v (want 1)", b1-b0, d1-d0)
	}
}
