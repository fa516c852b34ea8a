package pipeline_test

import (
	"testing"

	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/source"
)

// TestCrawlForNoSitemaps: a source's crawl does not read sitemaps (a new
// crawl does by default).
func TestCrawlForNoSitemaps(t *testing.T) {
	c := pipeline.CrawlFor(&source.Source{Name: "n", URL: "http://a.test/", Crawl: "src-n"})
	if c.Sitemaps {
		t.Error("a source's crawl reads sitemaps")
	}
}
