// Package tally is the half of farro's metrics that links no Prometheus
// code: the counting functions agentd's transaction sites call, the label
// values and the loopback check of --metrics-addr, and the spool's figures
// in the Prometheus text format, as `farroctl metrics` prints them.
//
// internal/metrics backs the counting functions with Prometheus (its
// package initialisation installs itself as the Sink); in a program that
// does not link internal/metrics, farroctl, they do nothing. farroctl
// shares internal/agent, internal/fetch and internal/daemon with the
// daemons, and the Prometheus client's package initialisation (its
// default registry with the Go and process collectors, the protobuf
// descriptors) more than doubled farroctl's start: a package that is
// linked at all runs its init, whatever the command.
package tally

import "time"

// Sink receives agentd's counts (internal/metrics).
type Sink interface {
	ClaimDone(latency, waited time.Duration)
	ClaimFailed(reason string)
	CommitDone(kind string, latency time.Duration)
	RunFinished(kind, outcome string, run time.Duration)
	SetSlots(n int)
	SlotBusy(delta int)
	CrawlFetched(crawl string, status int, bytes int64)
	CrawlRobotsDenied(crawl string)
}

// sink is written only by SetSink, from a package initialisation (which
// happens before main and before any goroutine of the program's own), so
// the counting functions read it without a lock.
var sink Sink = nop{}

// SetSink installs s as the receiver of every count. Call it only from a
// package initialisation (internal/metrics does).
func SetSink(s Sink) { sink = s }

// Outcomes of a run (farro_jobs_finished_total, farro_job_run_duration_seconds):
// the state the agent committed, released (drained back to queued), or lost
// (taken away by watchdogd while running; not committed by the agent).
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeKilled    = "killed"
	OutcomeHeld      = "held"
	OutcomeReleased  = "released"
	OutcomeLost      = "lost"
)

// ClaimDone records a successful claim: its latency, and how long the job
// had been waiting in incoming/ (zero or negative waits are not recorded).
func ClaimDone(latency, waited time.Duration) { sink.ClaimDone(latency, waited) }

// ClaimFailed counts a claim that did not take the job.
func ClaimFailed(reason string) { sink.ClaimFailed(reason) }

// CommitDone records the latency of a successful commit of a job of kind
// (any string: see KindLabel).
func CommitDone(kind string, latency time.Duration) { sink.CommitDone(kind, latency) }

// RunFinished records a finished run of a job of kind (any string: see
// KindLabel): its outcome and its time from claim.
func RunFinished(kind, outcome string, run time.Duration) { sink.RunFinished(kind, outcome, run) }

// SetSlots sets the agent's number of worker slots.
func SetSlots(n int) { sink.SetSlots(n) }

// SlotBusy moves the number of busy slots by delta (+1 when a job starts,
// -1 when it ends).
func SlotBusy(delta int) { sink.SlotBusy(delta) }

// CrawlFetched counts one fetch of crawl (an existing crawl's name): its
// HTTP status (0 for a network failure) and the body bytes received.
func CrawlFetched(crawl string, status int, bytes int64) { sink.CrawlFetched(crawl, status, bytes) }

// CrawlRobotsDenied counts a URL of crawl robots.txt kept us from fetching.
func CrawlRobotsDenied(crawl string) { sink.CrawlRobotsDenied(crawl) }

// nop is the Sink of a program without internal/metrics.
type nop struct{}

func (nop) ClaimDone(time.Duration, time.Duration)    {}
func (nop) ClaimFailed(string)                        {}
func (nop) CommitDone(string, time.Duration)          {}
func (nop) RunFinished(string, string, time.Duration) {}
func (nop) SetSlots(int)                              {}
func (nop) SlotBusy(int)                              {}
func (nop) CrawlFetched(string, int, int64)           {}
func (nop) CrawlRobotsDenied(string)                  {}
