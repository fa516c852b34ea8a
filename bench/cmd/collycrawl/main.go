// Command collycrawl is the crawl benchmark's Colly peer: a crawler written
// the way Colly's documentation shows, crawling one site from a seed
// (every <a href> followed, same host only, no politeness delay, robots.txt
// ignored as Colly does by default) with -parallel requests at a time.
//
//	collycrawl -parallel 8 [-idle-per-host 8] http://127.0.0.1:PORT/p/0.html
//
// It prints the pages it visited and the elapsed time as one JSON line.
// It runs as its own process so that the benchmark measures its peak RSS.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
)

func main() {
	parallel := flag.Int("parallel", 8, "Colly LimitRule Parallelism")
	idle := flag.Int("idle-per-host", 0, "http.Transport MaxIdleConnsPerHost (0: Colly's default transport)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: collycrawl [-parallel N] [-idle-per-host N] SEED")
		os.Exit(2)
	}
	seed := flag.Arg(0)
	su, err := url.Parse(seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c := colly.NewCollector(
		colly.Async(true),
		colly.AllowedDomains(su.Hostname()),
		colly.MaxDepth(0),
	)
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: *parallel}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *idle > 0 {
		c.WithTransport(&http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        100,
			MaxIdleConnsPerHost: *idle,
			IdleConnTimeout:     90 * time.Second,
		})
	}
	var pages, errs atomic.Int64
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		_ = e.Request.Visit(e.Attr("href"))
	})
	c.OnResponse(func(*colly.Response) { pages.Add(1) })
	c.OnError(func(*colly.Response, error) { errs.Add(1) })
	start := time.Now()
	if err := c.Visit(seed); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c.Wait()
	el := time.Since(start)
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"pages": pages.Load(), "errors": errs.Load(), "elapsed_s": el.Seconds()})
}
