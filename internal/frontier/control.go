package frontier

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/robots"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// cancelAskAgain is how long a cancel request to a running job is given
// before it is made again.
const cancelAskAgain = 5 * time.Second

// cancelInFlight kills the cancelled crawl's jobs still in flight: jobs
// nobody runs are moved to killed ("cancelled"), running ones are asked to
// stop through control.json. Finished ones are ingested as usual.
func (d *driver) cancelInFlight(now time.Time) {
	for id := range d.inflight {
		if _, ok := d.finished[id]; ok {
			continue
		}
		if t, ok := d.asked[id]; ok && now.Sub(t) < cancelAskAgain {
			continue
		}
		out, err := crawl.CancelJob(d.f.ctx, d.f.jobs, id, Actor)
		switch {
		case err != nil && errors.Is(err, job.ErrNotFound):
			d.finished[id] = ""
		case err != nil:
			d.log.Debug().Err(err).Str("job_id", id).Msg("cancel: will retry")
		case out == crawl.CancelRequested:
			d.asked[id] = now
		case out == crawl.CancelDone, out == crawl.CancelTerminal:
			// The move is seen as a watch event; look again right away
			// in case it is not.
			if st, err := d.stateOf(id); err == nil && st.Terminal() {
				d.finished[id] = st
			}
		}
	}
}

// applyRequests applies the operator requests waiting in requests/; the
// files are removed once the change is persisted.
func (d *driver) applyRequests(now time.Time) {
	dir := d.st.Path(crawl.RequestsDir)
	d.kept = map[string]bool{}
	names, err := readDirNames(dir)
	if err != nil || len(names) == 0 {
		return
	}
	sort.Strings(names)
	var refresh []*dom
	defer func() { d.startRefresh(refresh, now) }()
	for _, n := range names {
		p := filepath.Join(dir, n)
		b, err := fsq.ReadFileCapped(p, crawl.MaxRequestFileSize)
		if err != nil {
			continue
		}
		var r crawl.Request
		if err := json.Unmarshal(b, &r); err != nil {
			d.log.Error().Err(err).Str("file", p).Msg("unreadable request; removed")
			_ = os.Remove(p)
			continue
		}
		switch r.Op {
		case crawl.OpRefresh:
			// refresh.go: kept (not removed) while the domain still has
			// work; applied once it is exhausted.
			dm, keep := d.refreshRequest(&r, p, refresh)
			if keep {
				continue
			}
			if dm != nil {
				refresh = append(refresh, dm)
			}
		case crawl.OpRetry:
			d.retryRequest(&r, now) // retry.go
		case crawl.OpAddSeeds:
			if d.addSeedsRequest(&r, now) { // seeds.go
				continue
			}
		case crawl.OpRecrawl:
			if d.recrawlRequest(&r, now) { // recrawl.go
				continue
			}
		case crawl.OpReset:
			dm := d.get(r.Domain)
			if dm == nil {
				d.log.Warn().Str("domain", r.Domain).Msg("reset of an unknown domain ignored")
				break
			}
			from := dm.d.Status
			dm.d.Reset(now)
			if r.Reason != "" {
				dm.d.ReasonDetail = "by " + r.Actor + ": " + r.Reason
			}
			dm.parsed = map[string]*robots.Robots{}
			d.dirty[r.Domain] = true
			d.refreshWork(dm)
			d.log.Info().Str("domain", r.Domain).Str("requested_by", r.Actor).Str("from", string(from)).Msg("domain reset by operator")
		default:
			d.log.Error().Str("op", r.Op).Str("file", p).Msg("unknown request; removed")
		}
		d.requests = append(d.requests, p)
	}
}
