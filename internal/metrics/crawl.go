package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The crawl's metrics. No label carries a URL or a domain: the number of
// series stays fixed whatever is crawled. The crawl label is the crawl's
// name, given only once the crawl was found in the spool (crawls/<name>/,
// made by an operator), so it is bounded by the crawls there are.
var (
	crawlPages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "crawl", Name: "pages_total",
		Help: "Pages fetched by crawl.fetch jobs on this agent, by crawl and HTTP status class (1xx..5xx), or network_error (http_status 0).",
	}, []string{"crawl", "class"})
	crawlBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "crawl", Name: "bytes_total",
		Help: "Body bytes fetched by crawl.fetch jobs on this agent, by crawl.",
	}, []string{"crawl"})
	crawlRobotsDenied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "crawl", Name: "robots_denied_total",
		Help: "URLs not fetched because robots.txt disallowed them, by crawl.",
	}, []string{"crawl"})
	crawlDomainsDesc = prometheus.NewDesc(Namespace+"_crawl_domains",
		"Domains of the crawls being run, by crawl and status (pending, active, exhausted, blocked, unreachable).", []string{"crawl", "status"}, nil)
	domainCounter atomic.Pointer[func() map[string]map[string]int]
)

// CrawlClasses lists the label values of farro_crawl_pages_total.
var CrawlClasses = []string{"1xx", "2xx", "3xx", "4xx", "5xx", "network_error"}

// CrawlFetched counts one fetch of crawl (an existing crawl's name): its
// HTTP status (0 for a network failure) and the body bytes received. The
// first fetch of a crawl makes all its class series, zeros included.
func CrawlFetched(crawl string, status int, bytes int64) {
	class := "network_error"
	if status >= 100 && status < 600 {
		class = CrawlClasses[status/100-1]
	}
	for _, c := range CrawlClasses {
		crawlPages.WithLabelValues(crawl, c)
	}
	crawlPages.WithLabelValues(crawl, class).Inc()
	crawlBytes.WithLabelValues(crawl).Add(float64(max(bytes, 0)))
}

// CrawlRobotsDenied counts a URL of crawl robots.txt kept us from fetching.
func CrawlRobotsDenied(crawl string) { crawlRobotsDenied.WithLabelValues(crawl).Inc() }

// SetCrawlDomains installs the function managerd's frontier answers
// "how many domains of each crawl are in each status" with; it is called
// on every scrape, so it must read counts kept in memory, not list
// anything.
func SetCrawlDomains(count func() map[string]map[string]int) { domainCounter.Store(&count) }

type crawlDomains struct{}

func (crawlDomains) Describe(ch chan<- *prometheus.Desc) { ch <- crawlDomainsDesc }

func (crawlDomains) Collect(ch chan<- prometheus.Metric) {
	f := domainCounter.Load()
	if f == nil || *f == nil {
		return
	}
	for crawl, byStatus := range (*f)() {
		for status, n := range byStatus {
			ch <- prometheus.MustNewConstMetric(crawlDomainsDesc, prometheus.GaugeValue, float64(n), crawl, status)
		}
	}
}
