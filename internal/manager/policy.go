package manager

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// errChanged vetoes a Move whose job changed between the unlocked read
// that chose the transition and the read made under the lock.
var errChanged = errors.New("job changed since it was read; re-evaluating")

// maxReasonError bounds how much of a job's error is copied into a reason.
const maxReasonError = 200

// backoff returns the retry delay after the given number of attempts:
// exponential backoff with full jitter, a random duration in
// [0, min(max, base*2^(attempts-1))].
func backoff(base, max time.Duration, attempts int, rnd func(int64) int64) time.Duration {
	c := backoffCap(base, max, attempts)
	if c <= 0 {
		return 0
	}
	if c == time.Duration(1<<63-1) {
		return time.Duration(rnd(int64(c)))
	}
	return time.Duration(rnd(int64(c) + 1))
}

// backoffCap is min(max, base*2^(attempts-1)), computed without overflow.
func backoffCap(base, max time.Duration, attempts int) time.Duration {
	if attempts < 1 {
		attempts = 1
	}
	c := base
	for i := 1; i < attempts && c < max; i++ {
		if c > max/2 {
			return max
		}
		c *= 2
	}
	if c > max || c <= 0 {
		c = max
	}
	return c
}

func defaultRand(n int64) int64 { return rand.Int64N(n) }

// failedPlan is what the policy does with a failed job: defer it for a
// retry or kill it when it is out of attempts.
func (m *Manager) failedPlan(j *job.Job) (job.State, string) {
	max := j.EffectiveMaxAttempts(m.cfg.MaxAttempts)
	if j.Attempts >= max {
		return job.Killed, fmt.Sprintf("failed %d times: out of attempts", j.Attempts)
	}
	return job.Deferred, ""
}

// retryReason says which retry this is (of the max-1 a job gets), when it
// runs and why the last attempt failed.
func retryReason(j *job.Job, max int, delay time.Duration) string {
	cause := j.Error
	if cause == "" {
		cause = j.Reason
	}
	if cause == "" {
		cause = "handler failed"
	}
	return fmt.Sprintf("retry %d/%d in %s: %s", max1(j.Attempts), max-1, delay.Round(time.Millisecond), oneLine(cause, maxReasonError))
}

// stalePlan is what the policy does with a stale job: requeue it at once
// (a crash is not the job's fault) or kill it when it is out of attempts.
func (m *Manager) stalePlan(j *job.Job) (job.State, string) {
	max := j.EffectiveMaxAttempts(m.cfg.MaxAttempts)
	if j.Attempts >= max {
		return job.Killed, fmt.Sprintf("crashed and exceeded max retries (%d)", max)
	}
	return job.Queued, fmt.Sprintf("requeued after crash (attempt %d/%d)", j.Attempts, max)
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// oneLine collapses whitespace (a stderr tail has newlines) and truncates
// s to n bytes on a rune boundary.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// failedStep is the policy's move of failed job j, as read before the
// move: its target and reason, and the check and edit the move makes of
// the job as it is then (errChanged when the plan no longer holds; a
// retry's not_before).
func (m *Manager) failedStep(j *job.Job) (job.State, string, func(*job.Job) error) {
	to, reason := m.failedPlan(j)
	var delay time.Duration
	if to == job.Deferred {
		max := j.EffectiveMaxAttempts(m.cfg.MaxAttempts)
		delay = backoff(m.cfg.BackoffBase, m.cfg.BackoffMax, j.Attempts, m.cfg.Rand)
		reason = retryReason(j, max, delay)
	}
	return to, reason, func(nj *job.Job) error {
		if got, _ := m.failedPlan(nj); got != to || nj.Attempts != j.Attempts {
			return errChanged
		}
		if to == job.Deferred {
			nb := time.Now().UTC().Add(delay)
			nj.NotBefore = &nb
		}
		return nil
	}
}

// staleStep is failedStep for stale job j: the crash cause goes to the
// job's error.
func (m *Manager) staleStep(j *job.Job) (job.State, string, func(*job.Job) error) {
	to, reason := m.stalePlan(j)
	return to, reason, func(nj *job.Job) error {
		if got, _ := m.stalePlan(nj); got != to || nj.Attempts != j.Attempts {
			return errChanged
		}
		if j.Reason != "" {
			nj.Error = j.Reason // the crash cause, e.g. "owner died: pid gone (...)"
		}
		return nil
	}
}
