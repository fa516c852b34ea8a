package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The crawl's metrics. No label carries a URL or a domain: the number of
// series stays fixed whatever is crawled.
var (
	crawlPages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "crawl", Name: "pages_total",
		Help: "Pages fetched by crawl.fetch jobs on this agent, by HTTP status class (1xx..5xx), or network_error (http_status 0).",
	}, []string{"class"})
	crawlBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "crawl", Name: "bytes_total",
		Help: "Body bytes fetched by crawl.fetch jobs on this agent.",
	})
	crawlRobotsDenied = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "crawl", Name: "robots_denied_total",
		Help: "URLs not fetched because robots.txt disallowed them.",
	})
	crawlDomainsDesc = prometheus.NewDesc(Namespace+"_crawl_domains",
		"Domains of the crawls being run, by status (pending, active, exhausted, blocked, unreachable).", []string{"status"}, nil)
	domainCounter atomic.Pointer[func() map[string]int]
)

// CrawlClasses lists the label values of farro_crawl_pages_total.
var CrawlClasses = []string{"1xx", "2xx", "3xx", "4xx", "5xx", "network_error"}

func init() {
	for _, c := range CrawlClasses {
		crawlPages.WithLabelValues(c)
	}
}

// CrawlFetched counts one fetch: its HTTP status (0 for a network
// failure) and the body bytes received.
func CrawlFetched(status int, bytes int64) {
	class := "network_error"
	if status >= 100 && status < 600 {
		class = CrawlClasses[status/100-1]
	}
	crawlPages.WithLabelValues(class).Inc()
	if bytes > 0 {
		crawlBytes.Add(float64(bytes))
	}
}

// CrawlRobotsDenied counts a URL robots.txt kept us from fetching.
func CrawlRobotsDenied() { crawlRobotsDenied.Inc() }

// SetCrawlDomains installs the function managerd's frontier answers
// "how many domains are in each status" with; it is called on every
// scrape, so it must read counts kept in memory, not list anything.
func SetCrawlDomains(count func() map[string]int) { domainCounter.Store(&count) }

type crawlDomains struct{}

func (crawlDomains) Describe(ch chan<- *prometheus.Desc) { ch <- crawlDomainsDesc }

func (crawlDomains) Collect(ch chan<- prometheus.Metric) {
	f := domainCounter.Load()
	if f == nil || *f == nil {
		return
	}
	for status, n := range (*f)() {
		ch <- prometheus.MustNewConstMetric(crawlDomainsDesc, prometheus.GaugeValue, float64(n), status)
	}
}
