package ctl

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
)

// limitOf is how many of n rows --limit keeps (0: all).
func limitOf(n, limit int) int {
	if limit > 0 && limit < n {
		return limit
	}
	return n
}

// sortByYield orders domains for the top-domains view (domains --by
// yield): highest yield rate (pages with new content per page fetched)
// first, then most pages with new content, then by crawl and name.
// Domains with nothing fetched have no yield and come last. The yield
// rate is the priority's: the image yield rate in a crawl that fetches
// images (images.go).
func sortByYield(rows []DomainPriority) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if (a.PagesCrawled > 0) != (b.PagesCrawled > 0) {
			return a.PagesCrawled > 0
		}
		if a.YieldRate != b.YieldRate {
			return a.YieldRate > b.YieldRate
		}
		if a.PagesNew != b.PagesNew {
			return a.PagesNew > b.PagesNew
		}
		if a.Crawl != b.Crawl {
			return a.Crawl < b.Crawl
		}
		return a.Domain < b.Domain
	})
}

// printYield prints the top-domains table.
func printYield(w io.Writer, rows []DomainPriority) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CRAWL\tDOMAIN\tSTATUS\tYIELD\tNEW\tCRAWLED\tIMAGES\tIMG YIELD\tREMAINING\tERROR RATE")
	for _, r := range rows {
		yield, imgYield := "-", "-"
		if r.PagesCrawled > 0 {
			// The page yield, whichever rate the priority uses.
			yield = fmt.Sprintf("%.2f", float64(r.PagesNew)/float64(r.PagesCrawled))
			imgYield = fmt.Sprintf("%.2f", r.ImageYieldRate)
		}
		// IMAGES: stored / found (images.go).
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%s\t%d\t%.2f\n", r.Crawl, r.Domain, r.Status, yield, r.PagesNew, r.PagesCrawled,
			r.ImagesStored, r.ImagesFound, imgYield, r.Remaining, r.ErrorRate)
	}
	return tw.Flush()
}
