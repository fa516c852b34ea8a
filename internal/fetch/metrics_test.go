package fetch

import (
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/metrics"
)

// crawlFigures reads agentd's crawl metrics of crawl c: pages by class,
// bytes, robots denials.
func crawlFigures(t *testing.T, c string) (map[string]float64, float64, float64) {
	t.Helper()
	mfs, err := metrics.Registry(metrics.Agentd).Gather()
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]float64{}
	var bytes, denied float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["crawl"] != c {
				continue
			}
			switch mf.GetName() {
			case "farro_crawl_pages_total":
				pages[labels["class"]] = m.GetCounter().GetValue()
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
	p0, b0, d0 := crawlFigures(t, "c7")
	count(&crawl.Artifact{Crawl: "c7", Outcome: crawl.OutcomeFetched, HTTPStatus: 200, BodyBytes: 1000})
	count(&crawl.Artifact{Crawl: "c7", Outcome: crawl.OutcomeFetched, HTTPStatus: 503, BodyBytes: 10})
	count(&crawl.Artifact{Crawl: "c7", Outcome: crawl.OutcomeNetworkError})
	count(&crawl.Artifact{Crawl: "c7", Outcome: crawl.OutcomeRefused, ErrorCode: crawl.ErrCodeRobots})
	count(&crawl.Artifact{Crawl: "c7", Outcome: crawl.OutcomeRefused, ErrorCode: crawl.ErrCodeBadURL})
	count(&crawl.Artifact{Crawl: "c8", Outcome: crawl.OutcomeFetched, HTTPStatus: 200, BodyBytes: 5})
	p1, b1, d1 := crawlFigures(t, "c7")
	if _, ok := p1["4xx"]; !ok {
		t.Error("no pages{crawl=\"c7\",class=\"4xx\"} series (every class of a crawl is present)")
	}
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
