package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/internal/tally"
)

var (
	storeJobsDesc   = prometheus.NewDesc(tally.JobsName, tally.JobsStoreHelp, []string{"state"}, nil)
	storeByKindDesc = prometheus.NewDesc(tally.ByKindName, tally.ByKindStoreHelp, []string{"state", "kind"}, nil)
	storeOldestDesc = prometheus.NewDesc(tally.OldestName, tally.OldestStoreHelp, nil, nil)
)

// storeCollector exports the queue's gauges read from a PostgreSQL
// store (FollowStore): farro_jobs{state}, farro_jobs_by_kind and the
// oldest queued job, with the store's help texts (tally.StoreFamilies).
// It is unchecked (it describes nothing): a managerd runs either on a
// spool (spoolCollector exports these names) or on a store, never both,
// and each exports its own help texts. Until a first read, and after a
// read that failed, it exports nothing rather than figures that may be
// wrong.
type storeCollector struct {
	snap atomic.Pointer[spoolview.Snapshot]
}

var storeC = &storeCollector{}

func (c *storeCollector) Describe(chan<- *prometheus.Desc) {}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.snap.Load()
	if snap == nil {
		return
	}
	queueGauges(ch, [3]*prometheus.Desc{storeJobsDesc, storeByKindDesc, storeOldestDesc}, snap.States, snap.QueuedKinds, snap.OldestQueued)
}

// FollowStore reads the queue's figures with read at once and then
// every period, and exports them from this process's registry, until
// ctx is done. A failed read is given to onError and exports nothing
// until the next read succeeds. managerd on a PostgreSQL store runs it
// when it serves metrics (period: --metrics-rescan).
func FollowStore(ctx context.Context, read func(context.Context) (spoolview.Snapshot, error), period time.Duration, onError func(error)) {
	defer storeC.snap.Store(nil)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, max(period, 10*time.Second))
		snap, err := read(rctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			storeC.snap.Store(nil)
			onError(err)
		default:
			snap.Ready = true
			storeC.snap.Store(&snap)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
