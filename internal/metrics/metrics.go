// Package metrics is farro's Prometheus instrumentation: the metrics each
// daemon exports, the functions the transaction sites call to count and
// time what they do, the collector of the spool's figures (from an
// internal/spoolview View, so a scrape never lists a directory) and the
// opt-in loopback HTTP endpoint. farroctl does not link this package (the
// Prometheus client's initialisation would run at its every start): the
// counting functions agentd's code calls are internal/tally's, which
// forwards them here once this package is linked, and `farroctl metrics`
// renders the spool's gauges with tally.SpoolText, the same bytes as this
// package's collector through the Prometheus client.
//
// Which process exports what (so that sum() over all targets never counts
// twice):
//
//	every daemon  farro_build_info, go_*, process_*
//	agentd        runs finished by outcome, run time, queue wait, claim and
//	              commit latency, failed claims, worker slots, crawl fetches
//	managerd      jobs per state, oldest queued job, locks, corrupt entries,
//	              retries, jobs out of attempts, promotions, crawl domains,
//	              jobs removed by retention, submissions (from the event stream)
//	watchdogd     recoveries by kind, failed recoveries
//	farroctl      `farroctl metrics`: the spool's figures (managerd's gauges,
//	              rendered by internal/tally)
//
// The counting functions are cheap and safe to call whether or not an
// endpoint is served.
package metrics

import (
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/farro-dev/farro/internal/tally"
	"github.com/farro-dev/farro/pkg/job"
)

// Namespace prefixes every farro metric.
const Namespace = "farro"

// Daemon names, as given to Register.
const (
	Agentd    = "agentd"
	Managerd  = "managerd"
	Watchdogd = "watchdogd"
	Farroctl  = "farroctl"
)

// Outcomes of a run (farro_jobs_finished_total, farro_job_run_duration_seconds):
// the state the agent committed, released (drained back to queued), or lost
// (taken away by watchdogd while running; not committed by the agent).
const (
	OutcomeSucceeded = tally.OutcomeSucceeded
	OutcomeFailed    = tally.OutcomeFailed
	OutcomeKilled    = tally.OutcomeKilled
	OutcomeHeld      = tally.OutcomeHeld
	OutcomeReleased  = tally.OutcomeReleased
	OutcomeLost      = tally.OutcomeLost
)

// Outcomes lists every outcome label value.
var Outcomes = []string{OutcomeSucceeded, OutcomeFailed, OutcomeKilled, OutcomeHeld, OutcomeReleased, OutcomeLost}

// Recovery kinds (farro_recoveries_total): every recovery counts once,
// under the first that applies.
const (
	RecoveryDeadOwner     = "dead_owner"     // a dead holder's running job moved to stale/
	RecoverySilentOwner   = "silent_owner"   // a silent holder's running job moved to stale/
	RecoveryRolledForward = "rolled_forward" // a half-done commit completed
	RecoveryRolledBack    = "rolled_back"    // a half-done claim undone
	RecoveryRepaired      = "repaired"       // status rewritten to match the directory
	RecoveryQuarantined   = "quarantined"    // unreadable job moved to corrupt/
	RecoveryLockRemoved   = "lock_removed"   // nothing to recover: a dead holder's lock removed
)

// RecoveryKinds lists every recovery kind label value.
var RecoveryKinds = []string{RecoveryDeadOwner, RecoverySilentOwner, RecoveryRolledForward,
	RecoveryRolledBack, RecoveryRepaired, RecoveryQuarantined, RecoveryLockRemoved}

// Claim failure reasons (farro_claims_failed_total).
var ClaimFailures = []string{"locked", "vanished", "schema", "state", "corrupt", "other"}

// JobBuckets fit jobs of seconds to hours: 0.1 s to 1 day.
var JobBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400}

// TxBuckets fit one spool transaction: 0.5 ms to 10 s (fsyncs dominate).
var TxBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// agentd.
var (
	finished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "jobs_finished_total",
		Help: "Job runs this agent finished, by outcome: the state it committed (succeeded, failed, killed, held), released (drained back to queued) or lost (taken away by watchdogd); and by job kind (a kind farro does not know: other).",
	}, []string{"outcome", "kind"})
	runTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "job_run_duration_seconds",
		Help:    "Time from claim to commit of each run, by outcome and job kind (a kind farro does not know: other).",
		Buckets: JobBuckets,
	}, []string{"outcome", "kind"})
	queueWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "job_queue_wait_seconds",
		Help:    "Time a job waited in incoming/ (since it was queued, released or promoted) before this agent claimed it.",
		Buckets: JobBuckets,
	})
	claimTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "claim_duration_seconds",
		Help:    "Latency of successful claims (lock, checks, rename to in-progress/, job.json rewrite).",
		Buckets: TxBuckets,
	})
	commitTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "commit_duration_seconds",
		Help:    "Latency of commits (job.json rewrite, event, rename, unlock), by job kind (a kind farro does not know: other).",
		Buckets: TxBuckets,
	}, []string{"kind"})
	claimFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "claims_failed_total",
		Help: "Claims that did not take the job, by reason: locked (lost a race), vanished, schema (unknown schema_version), state, corrupt (quarantined), other.",
	}, []string{"reason"})
	slots = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "agent_slots",
		Help: "Worker slots of this agent (--concurrency).",
	})
	slotsBusy = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "agent_slots_busy",
		Help: "Worker slots of this agent running a job now.",
	})
)

// managerd.
var (
	retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "retries_total",
		Help: "Retries scheduled by managerd, by the state retried: failed (deferred with backoff) or stale (requeued at once).",
	}, []string{"from"})
	outOfAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "jobs_out_of_attempts_total",
		Help: "Jobs managerd killed because they were out of attempts, by the state they were in (failed or stale).",
	}, []string{"from"})
	promoted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "deferred_promoted_total",
		Help: "Deferred jobs managerd moved to incoming/ when due.",
	})
)

// watchdogd.
var (
	recoveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "recoveries_total",
		Help: "Recoveries made by watchdogd, by kind: dead_owner and silent_owner (a running job moved to stale/), rolled_forward, rolled_back, repaired, quarantined, lock_removed.",
	}, []string{"kind"})
	recoveryFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "recoveries_failed_total",
		Help: "Recoveries watchdogd attempted that failed (retried later; see its error log).",
	})
	recoveryWaits = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "recovery_handler_waits_total",
		Help: "Checks at which a recovery waited because an execution of the job still ran (just killed, or unkillable: in uninterruptible sleep); the job stays in in-progress/ meanwhile.",
	})
)

func init() {
	for _, o := range Outcomes {
		for _, k := range kindLabels() {
			finished.WithLabelValues(o, k)
		}
	}
	for _, r := range ClaimFailures {
		claimFailed.WithLabelValues(r)
	}
	for _, st := range []job.State{job.Failed, job.Stale} {
		retries.WithLabelValues(string(st))
		outOfAttempts.WithLabelValues(string(st))
	}
	for _, k := range RecoveryKinds {
		recoveries.WithLabelValues(k)
	}
	tally.SetSink(sink{})
}

// sink is the tally.Sink of a program that links this package: the
// counts of internal/agent and internal/fetch land in these metrics.
type sink struct{}

func (sink) ClaimDone(latency, waited time.Duration)           { ClaimDone(latency, waited) }
func (sink) ClaimFailed(reason string)                         { ClaimFailed(reason) }
func (sink) CommitDone(kind string, latency time.Duration)     { CommitDone(kind, latency) }
func (sink) RunFinished(kind, outcome string, d time.Duration) { RunFinished(kind, outcome, d) }
func (sink) SetSlots(n int)                                    { SetSlots(n) }
func (sink) SlotBusy(delta int)                                { SlotBusy(delta) }
func (sink) CrawlFetched(crawl string, status int, bytes int64) {
	CrawlFetched(crawl, status, bytes)
}
func (sink) CrawlRobotsDenied(crawl string) { CrawlRobotsDenied(crawl) }

// ClaimDone records a successful claim: its latency, and how long the job
// had been waiting in incoming/ (zero or negative waits are not recorded).
func ClaimDone(latency, waited time.Duration) {
	claimTime.Observe(latency.Seconds())
	if waited > 0 {
		queueWait.Observe(waited.Seconds())
	}
}

// ClaimFailed counts a claim that did not take the job.
func ClaimFailed(reason string) { claimFailed.WithLabelValues(reason).Inc() }

// CommitDone records the latency of a successful commit of a job of kind
// (any string: see KindLabel).
func CommitDone(kind string, latency time.Duration) {
	commitTime.WithLabelValues(KindLabel(kind)).Observe(latency.Seconds())
}

// RunFinished records a finished run of a job of kind (any string: see
// KindLabel): its outcome and its time from claim.
func RunFinished(kind, outcome string, run time.Duration) {
	k := KindLabel(kind)
	finished.WithLabelValues(outcome, k).Inc()
	runTime.WithLabelValues(outcome, k).Observe(run.Seconds())
}

// SetSlots sets the agent's number of worker slots.
func SetSlots(n int) { slots.Set(float64(n)) }

// SlotBusy moves the number of busy slots by delta (+1 when a job starts,
// -1 when it ends).
func SlotBusy(delta int) { slotsBusy.Add(float64(delta)) }

// Retried counts a retry of a failed or stale job.
func Retried(from job.State) { retries.WithLabelValues(string(from)).Inc() }

// OutOfAttempts counts a job killed for lack of attempts.
func OutOfAttempts(from job.State) { outOfAttempts.WithLabelValues(string(from)).Inc() }

// Promoted counts a deferred job moved to incoming/.
func Promoted() { promoted.Inc() }

// Recovered counts one recovery by its recovery action (job.Action*);
// silent says whether the holder was judged silent rather than dead.
func Recovered(action string, silent bool) {
	kind := RecoveryLockRemoved
	switch action {
	case job.ActionStale:
		kind = RecoveryDeadOwner
		if silent {
			kind = RecoverySilentOwner
		}
	case job.ActionRolledForward:
		kind = RecoveryRolledForward
	case job.ActionRolledBack:
		kind = RecoveryRolledBack
	case job.ActionRepaired:
		kind = RecoveryRepaired
	case "quarantined":
		kind = RecoveryQuarantined
	}
	recoveries.WithLabelValues(kind).Inc()
}

// RecoveryFailed counts a failed recovery.
func RecoveryFailed() { recoveryFailed.Inc() }

// RecoveryWaited counts a recovery put off because an execution of the
// job still ran.
func RecoveryWaited() { recoveryWaits.Inc() }

// Version is reported by farro_build_info; the daemons set it from
// internal/daemon.Version.
var Version = "dev"

func buildInfo(daemon string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: tally.BuildInfoName, Help: tally.BuildInfoHelp,
		ConstLabels: prometheus.Labels{"version": Version, "goversion": runtime.Version(), "program": daemon},
	})
	g.Set(1)
	return g
}

var (
	mu      sync.Mutex
	process *prometheus.Registry
	spoolC  = &spoolCollector{}
)

// Registry returns this process's registry, created on first use for
// daemon (later calls return the same one, whatever they pass): build
// info, the Go runtime and process collectors, and daemon's own metrics.
func Registry(daemon string) *prometheus.Registry {
	mu.Lock()
	defer mu.Unlock()
	if process != nil {
		return process
	}
	r := prometheus.NewRegistry()
	r.MustRegister(buildInfo(daemon), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	switch daemon {
	case Agentd:
		r.MustRegister(finished, runTime, queueWait, claimTime, commitTime, claimFailed, slots, slotsBusy,
			crawlPages, crawlBytes, crawlRobotsDenied)
	case Managerd:
		r.MustRegister(retries, outOfAttempts, promoted, spoolC, storeC, crawlDomains{}, crawlPending{}, retentionRemoved, submitted)
	case Watchdogd:
		r.MustRegister(recoveries, recoveryFailed, recoveryWaits)
	}
	process = r
	return r
}
