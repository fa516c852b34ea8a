// Package crawlb is the crawl benchmark: a generated static site served
// by a private nginx on loopback, crawled by farro (its real daemons),
// by a Colly crawler and by wget --recursive, with every request counted
// from nginx's own access log.
package crawlb

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Site is a generated site: pages /p/0.html .. /p/(N-1).html, each 5..9
// KiB of HTML with about 10 links, every page reachable from /p/0.html.
type Site struct {
	Dir   string
	Pages int
	Links int // links in all pages
	Bytes int64
}

// SeedPath is the crawl's start page.
const SeedPath = "/p/0.html"

// Generate writes n pages under dir/p/. Page i links to its tree children
// 7i+1..7i+7 (so every page is reachable, depth about log7 n) and to
// pseudo-random other pages up to 10 links (links a crawler has to
// deduplicate); pages are padded with text to a size drawn from 5..9 KiB.
func Generate(dir string, n int) (*Site, error) {
	if err := os.MkdirAll(filepath.Join(dir, "p"), 0o755); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(20261121, uint64(n)))
	s := &Site{Dir: dir, Pages: n}
	const words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua "
	for i := 0; i < n; i++ {
		var links []int
		for c := 7*i + 1; c <= 7*i+7 && c < n; c++ {
			links = append(links, c)
		}
		for len(links) < 10 {
			links = append(links, rng.IntN(n))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>page %d</title></head>\n<body>\n<h1>Page %d</h1>\n<ul>\n", i, i)
		for _, l := range links {
			fmt.Fprintf(&b, "<li><a href=\"/p/%d.html\">page %d</a></li>\n", l, l)
		}
		b.WriteString("</ul>\n<p>")
		size := 5*1024 + rng.IntN(4*1024+1)
		for b.Len() < size-len("</p>\n</body></html>\n") {
			k := rng.IntN(len(words) - 20)
			b.WriteString(words[k : k+20])
		}
		b.WriteString("</p>\n</body></html>\n")
		page := b.String()
		if err := os.WriteFile(filepath.Join(dir, "p", fmt.Sprintf("%d.html", i)), []byte(page), 0o644); err != nil {
			return nil, err
		}
		s.Links += len(links)
		s.Bytes += int64(len(page))
	}
	return s, nil
}
