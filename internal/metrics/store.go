package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/internal/tally"
	"github.com/farro-dev/farro/pkg/job"
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
	for _, st := range job.States {
		ch <- prometheus.MustNewConstMetric(storeJobsDesc, prometheus.GaugeValue, float64(snap.States[st]), string(st))
	}
	byKind := make(map[string]int, len(Kinds)+1)
	for _, k := range kindLabels() {
		byKind[k] = 0
	}
	for k, n := range snap.QueuedKinds {
		byKind[KindLabel(k)] += n
	}
	for k, n := range byKind {
		ch <- prometheus.MustNewConstMetric(storeByKindDesc, prometheus.GaugeValue, float64(n), string(job.Queued), k)
	}
	oldest := 0.0
	if !snap.OldestQueued.IsZero() {
		oldest = float64(snap.OldestQueued.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(storeOldestDesc, prometheus.GaugeValue, oldest)
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
