package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/pkg/job"
)

var (
	jobsDesc = prometheus.NewDesc(Namespace+"_jobs",
		"Jobs in the spool, by state (the directory they are in); every state is present, zeros included.",
		[]string{"state"}, nil)
	byKindDesc = prometheus.NewDesc(Namespace+"_jobs_by_kind",
		"Queued jobs (state=\"queued\", incoming/) by job kind; a kind farro does not know is counted as other. Every kind is present, zeros included.",
		[]string{"state", "kind"}, nil)
	oldestDesc = prometheus.NewDesc(Namespace+"_oldest_queued_job_timestamp_seconds",
		"created_at of the oldest job in incoming/ (Unix time); 0 when nothing is queued.",
		nil, nil)
	locksDesc = prometheus.NewDesc(Namespace+"_claim_locks",
		"Claim locks in incoming/ (jobs being claimed, run, or moved right now).",
		nil, nil)
	corruptDesc = prometheus.NewDesc(Namespace+"_corrupt_entries",
		"Quarantined entries in corrupt/ (never deleted by farro; see farroctl fsck).",
		nil, nil)
	rescanDesc = prometheus.NewDesc(Namespace+"_spool_last_rescan_timestamp_seconds",
		"When the spool was last listed in full (Unix time); between listings the figures follow fsnotify events.",
		nil, nil)
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
	for _, st := range job.States {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(snap.States[st]), string(st))
	}
	byKind := make(map[string]int, len(Kinds)+1)
	for _, k := range kindLabels() {
		byKind[k] = 0
	}
	for k, n := range snap.QueuedKinds {
		byKind[KindLabel(k)] += n
	}
	for k, n := range byKind {
		ch <- prometheus.MustNewConstMetric(byKindDesc, prometheus.GaugeValue, float64(n), string(job.Queued), k)
	}
	oldest := 0.0
	if !snap.OldestQueued.IsZero() {
		oldest = float64(snap.OldestQueued.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, oldest)
	ch <- prometheus.MustNewConstMetric(locksDesc, prometheus.GaugeValue, float64(snap.Locks))
	ch <- prometheus.MustNewConstMetric(corruptDesc, prometheus.GaugeValue, float64(snap.Corrupt))
	ch <- prometheus.MustNewConstMetric(rescanDesc, prometheus.GaugeValue, float64(snap.LastRescan.UnixNano())/1e9)
}

// SpoolRegistry is a registry holding only build info (for program) and
// v's figures: what `farroctl metrics` writes. It has no Go or process
// metrics, which node_exporter exports itself.
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
