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
	jobsDesc    = prometheus.NewDesc(tally.JobsName, tally.JobsHelp, []string{"state"}, nil)
	byKindDesc  = prometheus.NewDesc(tally.ByKindName, tally.ByKindHelp, []string{"state", "kind"}, nil)
	oldestDesc  = prometheus.NewDesc(tally.OldestName, tally.OldestHelp, nil, nil)
	locksDesc   = prometheus.NewDesc(tally.LocksName, tally.LocksHelp, nil, nil)
	corruptDesc = prometheus.NewDesc(tally.CorruptName, tally.CorruptHelp, nil, nil)
	rescanDesc  = prometheus.NewDesc(tally.RescanName, tally.RescanHelp, nil, nil)
)

// spoolCollector turns a spoolview snapshot into metrics. A scrape costs
// the same whatever the spool holds. Until the view's first listing is
// done it exports nothing (rather than zeros that would be wrong).
type spoolCollector struct {
	view atomic.Pointer[spoolview.View]
}

// WatchSpool makes this process's registry export v's figures.
func WatchSpool(v *spoolview.View) { spoolC.view.Store(v) }

func (c *spoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobsDesc, byKindDesc, oldestDesc, locksDesc, corruptDesc, rescanDesc} {
		ch <- d
	}
}

func (c *spoolCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.view.Load()
	if v == nil {
		return
	}
	snap := v.Snapshot()
	if !snap.Ready {
		return
	}
	queueGauges(ch, [3]*prometheus.Desc{jobsDesc, byKindDesc, oldestDesc}, snap.States, snap.QueuedKinds, snap.OldestQueued)
	ch <- prometheus.MustNewConstMetric(locksDesc, prometheus.GaugeValue, float64(snap.Locks))
	ch <- prometheus.MustNewConstMetric(corruptDesc, prometheus.GaugeValue, float64(snap.Corrupt))
	ch <- prometheus.MustNewConstMetric(rescanDesc, prometheus.GaugeValue, float64(snap.LastRescan.UnixNano())/1e9)
}

// SpoolRegistry is a registry holding only build info (for program) and
// v's figures: what `farroctl metrics` writes (farroctl renders it with
// tally.SpoolText, tested against this registry byte for byte). It has
// no Go or process metrics, which node_exporter exports itself.
func SpoolRegistry(program string, v *spoolview.View) *prometheus.Registry {
	c := &spoolCollector{}
	c.view.Store(v)
	r := prometheus.NewRegistry()
	r.MustRegister(buildInfo(program), c)
	return r
}

// FollowSpool keeps a spoolview of s (full relisting every rescan, fsnotify
// in between) and exports it from this process's registry, until ctx is
// done. managerd runs it when it serves metrics.
func FollowSpool(ctx context.Context, s *job.Spool, rescan time.Duration, noNotify bool, onError func(error)) error {
	v := spoolview.New(s, spoolview.Config{Rescan: rescan, NoNotify: noNotify, OnError: onError})
	WatchSpool(v)
	return v.Run(ctx)
}

// queueGauges sends the queue's gauges, a spool's or a store's: jobs per
// state, queued jobs per kind label, the oldest queued job's time (0:
// none), as descs[0], descs[1] and descs[2].
func queueGauges(ch chan<- prometheus.Metric, descs [3]*prometheus.Desc, states map[job.State]int, queuedKinds map[string]int, oldestQueued time.Time) {
	for _, st := range job.States {
		ch <- prometheus.MustNewConstMetric(descs[0], prometheus.GaugeValue, float64(states[st]), string(st))
	}
	byKind := make(map[string]int, len(Kinds)+1)
	for _, k := range kindLabels() {
		byKind[k] = 0
	}
	for k, n := range queuedKinds {
		byKind[KindLabel(k)] += n
	}
	for k, n := range byKind {
		ch <- prometheus.MustNewConstMetric(descs[1], prometheus.GaugeValue, float64(n), string(job.Queued), k)
	}
	oldest := 0.0
	if !oldestQueued.IsZero() {
		oldest = float64(oldestQueued.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(descs[2], prometheus.GaugeValue, oldest)
}
