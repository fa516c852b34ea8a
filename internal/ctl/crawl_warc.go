package ctl

import (
	"fmt"
	"os"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/crawlwarc"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// CrawlExportWARCOptions are `farroctl crawl export --warc`'s.
type CrawlExportWARCOptions struct {
	Dir     string // where the WARC files go (created if missing)
	MaxSize int64  // rotate files at this size (0: 1 GiB)
}

// CrawlExportWARC writes the crawl's fetches as WARC/1.1 files in o.Dir,
// one URL at a time in the order the crawl finished them (outcomes.jsonl,
// one per job): request and response (or revisit) records from the
// artifact's exchange and the stored body, and a metadata record with the
// outcome. It prints each file's path, then a summary. A body missing or
// not as recorded is reported and the URL keeps its other records.
func (c *Ctl) CrawlExportWARC(name string, o CrawlExportWARCOptions) error {
	if o.Dir == "" {
		return Usagef("crawl export --warc needs a directory")
	}
	if o.MaxSize < 0 {
		return Usagef("--warc-max-size must be positive")
	}
	s, st, cr, err := c.crawlStore(name)
	if err != nil {
		return err
	}
	jobs := spoolstore.New(s)
	w, err := crawlwarc.Create(o.Dir, crawlwarc.Options{Crawl: name, MaxSize: o.MaxSize, Software: "farro",
		Info: map[string]string{"http-header-user-agent": cr.UserAgent, "description": "farro crawl " + name}})
	if err != nil {
		return err
	}
	done := map[string]bool{}
	urls, noBody := 0, 0
	var werr error
	err = st.ScanOutcomes(func(oc *crawl.Outcome) bool {
		key := oc.JobID
		if key == "" {
			key = oc.URL
		}
		if done[key] {
			return true
		}
		done[key] = true
		a := artifactOf(jobs, name, oc)
		body, f, berr := c.warcBody(st, a)
		if berr != nil {
			c.warnf("crawl export: %s: %v", a.NormalizedURL, berr)
			noBody++
		}
		werr = w.Add(a, body)
		if f != nil {
			f.Close()
		}
		urls++
		return werr == nil
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		w.Abort()
		return err
	}
	files, err := w.Close()
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(c.Stdout, f)
	}
	fmt.Fprintf(c.Stdout, "%d URLs, %d records, %d files\n", urls, w.Records, len(files))
	if noBody > 0 {
		return fmt.Errorf("crawl export: %d URLs exported without their body (above)", noBody)
	}
	return nil
}

// warcBody opens the stored body of a fetched, changed response: nil when
// there is none to write. The caller closes the file.
func (c *Ctl) warcBody(st *crawl.Store, a *crawl.Artifact) (*crawlwarc.Body, *os.File, error) {
	if a.Outcome != crawl.OutcomeFetched || a.Unchanged || a.SHA256 == "" {
		return nil, nil, nil
	}
	f, size, err := fsq.OpenRegular(st.BodyPath(a.SHA256))
	if err != nil {
		return nil, nil, fmt.Errorf("body: %w", err)
	}
	// An artifact rebuilt from the outcome log (its job removed by
	// retention) does not know the body's size: the file's is taken.
	if known := a.Exchange != nil || a.BodyBytes > 0; known && size != a.BodyBytes {
		f.Close()
		return nil, nil, fmt.Errorf("body %s: %d bytes, the fetch recorded %d", st.BodyPath(a.SHA256), size, a.BodyBytes)
	}
	return &crawlwarc.Body{R: f, Size: size}, f, nil
}
