package ctl_test

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// TestCrawlStatusRateOfAFastCrawl: a crawl finishing 300 URLs a second
// with long URLs writes more outcome lines in its last minute than a
// fixed tail of outcomes.jsonl holds (about 9 MiB here); its rate is
// still 300/s (it read about a third of that before), and a file whose
// window exceeds what status reads is measured over the part read, not
// reported as a slower crawl.
func TestCrawlStatusRateOfAFastCrawl(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC().Truncate(time.Second)
	e.rateCrawl("fast", now, 2*time.Minute, 0, nil, 0)
	st, _ := crawl.Open(e.s, "fast")
	f, err := os.Create(st.Path(crawl.OutcomesFile))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	pad := strings.Repeat("x", 400)
	const perSecond = 300
	for s := 90; s > 0; s-- { // 90 s of outcomes, oldest first
		for i := 0; i < perSecond; i++ {
			at := now.Add(-time.Duration(s)*time.Second + time.Duration(i)*time.Second/perSecond)
			fmt.Fprintf(w, `{"time":%q,"url":"http://example.org/%s/%d/%d","outcome":"fetched"}`+"\n", at.Format(time.RFC3339Nano), pad, s, i)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s := e.crawlSummary("fast", now)
	if math.Abs(s.RatePerSecond-perSecond) > 1 || s.RateWindowS <= 0 {
		t.Errorf("rate %.1f/s over %.1f s, want %d/s", s.RatePerSecond, s.RateWindowS, perSecond)
	}
}

// TestCrawlStatusRateBeyondTheReadCap: when the last minute's outcome
// lines exceed what status reads (64 MiB), the rate is that of the part
// read, over the time it covers, not the window's count diluted.
func TestCrawlStatusRateBeyondTheReadCap(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC().Truncate(time.Second)
	e.rateCrawl("huge", now, 2*time.Minute, 0, nil, 0)
	st, _ := crawl.Open(e.s, "huge")
	f, err := os.Create(st.Path(crawl.OutcomesFile))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	pad := strings.Repeat("y", 4000)
	const perSecond = 300 // ~4 KiB lines: 60 s are ~70 MiB
	for s := 60; s > 0; s-- {
		for i := 0; i < perSecond; i++ {
			at := now.Add(-time.Duration(s)*time.Second + time.Duration(i)*time.Second/perSecond)
			fmt.Fprintf(w, `{"time":%q,"url":"http://example.org/%s","outcome":"fetched"}`+"\n", at.Format(time.RFC3339Nano), pad)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s := e.crawlSummary("huge", now)
	if math.Abs(s.RatePerSecond-perSecond) > 2 || s.RateWindowS >= 60 || s.RateWindowS < 30 {
		t.Errorf("rate %.1f/s over %.1f s, want %d/s over the part read (under 60 s)", s.RatePerSecond, s.RateWindowS, perSecond)
	}
}
