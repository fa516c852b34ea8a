package ctl

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/farro-dev/farro/internal/crawl"
)

// CrawlFsckReport is farroctl crawl fsck --json's answer.
type CrawlFsckReport struct {
	Crawl   string        `json:"crawl"`
	Equal   bool          `json:"equal"`
	Diffs   []string      `json:"diffs"`
	Stored  *crawl.Counts `json:"stored"`
	Recount *crawl.Counts `json:"recount"`
}

// CrawlFsck compares every counter a crawl shows (its domain files and
// frontier.json, what crawl status adds up) with a recount from its
// durable records (crawl.Recount). It exits 0 when all are equal, 1 with
// one line per difference otherwise; a crawl a frontier is driving is
// refused (it moves on while the recount reads), exit 1.
func (c *Ctl) CrawlFsck(name string, jsonOut bool) error {
	_, st, _, err := c.crawlStore(name)
	if err != nil {
		return err
	}
	l, err := crawl.TryFlock(st.Path(crawl.FrontierLock))
	if err != nil {
		if errors.Is(err, crawl.ErrBusy) {
			return fmt.Errorf("crawl %s: a frontier is driving it (managerd running); its counters move while they are recounted: stop managerd or wait for the crawl to finish", name)
		}
		return err
	}
	defer l.Unlock()
	stored, err := st.Stored()
	if err != nil {
		return err
	}
	re, err := crawl.Recount(st)
	if err != nil {
		return err
	}
	diffs := stored.Diff(re)
	if jsonOut {
		r := CrawlFsckReport{Crawl: name, Equal: len(diffs) == 0, Diffs: diffs, Stored: stored, Recount: re}
		if r.Diffs == nil {
			r.Diffs = []string{}
		}
		if err := json.NewEncoder(c.Stdout).Encode(&r); err != nil {
			return err
		}
	} else {
		for _, d := range diffs {
			fmt.Fprintf(c.Stdout, "%s: %s\n", name, d)
		}
		if len(diffs) == 0 {
			fmt.Fprintf(c.Stdout, "%s: every counter equals a recount from the crawl's records (%d domains)\n", name, len(re.Domains))
		}
	}
	if len(diffs) > 0 {
		return silent("crawl %s: %d counter(s) differ from a recount", name, len(diffs))
	}
	return nil
}
