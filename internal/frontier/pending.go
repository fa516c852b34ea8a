package frontier

// Pending work at a glance: the frontier keeps each crawl's count of
// pending URLs (queued, not released) where it is one cheap read,
// rather than have readers sum every domain file: in frontier.json
// (pending_urls, written with the crawl's other frontier state within a
// second or so of a change: farroctl crawl ls) and in memory for
// managerd's metrics (farro_crawl_pending_urls{crawl}). It is a running
// sum over the domains' summaries (domcache.go), read once a second
// (countDomains) and when the driver stops.

// notePending counts the crawl's pending URLs and records the count in
// frontier.json's state (persist writes it).
func (d *driver) notePending() int64 {
	n := d.pendingTotal()
	if d.fr != nil && d.fr.PendingURLs != n {
		d.fr.PendingURLs = n
		d.frDirty = true
	}
	return n
}

// PendingURLs returns, for each crawl this frontier is running now
// (running or paused), its URLs queued and not released yet, as counted
// at most a second ago. It reads a snapshot: safe from any goroutine.
func (f *Frontier) PendingURLs() map[string]int64 {
	if m := f.pendingURLs.Load(); m != nil {
		return *m
	}
	return map[string]int64{}
}
