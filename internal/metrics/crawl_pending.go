package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// farro_crawl_pending_urls: pending work at a glance, per crawl.
var (
	crawlPendingDesc = prometheus.NewDesc(Namespace+"_crawl_pending_urls",
		"URLs queued and not released yet, by crawl, for the crawls managerd's frontier runs (running or paused); kept by the frontier, at most a second old.", []string{"crawl"}, nil)
	pendingCounter atomic.Pointer[func() map[string]int64]
)

// SetCrawlPending installs the function managerd's frontier answers "how
// many URLs does each crawl have pending" with; it is called on every
// scrape, so it must read counts kept in memory.
func SetCrawlPending(count func() map[string]int64) { pendingCounter.Store(&count) }

type crawlPending struct{}

func (crawlPending) Describe(ch chan<- *prometheus.Desc) { ch <- crawlPendingDesc }

func (crawlPending) Collect(ch chan<- prometheus.Metric) {
	f := pendingCounter.Load()
	if f == nil || *f == nil {
		return
	}
	for crawl, n := range (*f)() {
		ch <- prometheus.MustNewConstMetric(crawlPendingDesc, prometheus.GaugeValue, float64(n), crawl)
	}
}
