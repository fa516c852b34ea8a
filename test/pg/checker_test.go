package pg

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// stormHandler is the handler of this package's runs. It takes an exclusive flock on a
// file of its job's while it runs (the kernel releases it when the
// handler dies, however it dies), names its claim in a holder file, and
// appends to the runs file all the hosts share:
//
//	start JOB TOKEN ATTEMPT AGENT NS  when it holds the lock
//	end JOB TOKEN                     when its work is done (then exit 0)
//	overlap JOB TOKEN HOLDER NS       when another execution of JOB holds
//	                                  the lock (HOLDER: its token); exit 3
//
// NS: the time, in nanoseconds since the epoch.
//
// AGENT comes from FARRO_JOB_DIR (<local>/scratch/<agent>/<job id>). It
// sleeps $SLEEP seconds, or $LONG for a prompt with "long"; a prompt
// with "fail" fails its first attempt (exit 7, after its end line).
const stormHandler = `#!/bin/sh
prompt=$(cat)
exec 9>>"$LOCKS/$FARRO_JOB_ID"
if ! flock -n 9; then echo "overlap $FARRO_JOB_ID $FARRO_CLAIM_TOKEN $(cat "$LOCKS/$FARRO_JOB_ID.holder" 2>/dev/null || echo unknown) $(date +%s%N)" >> "$RUNS"; exit 3; fi
echo "$FARRO_CLAIM_TOKEN" > "$LOCKS/$FARRO_JOB_ID.holder"
agent=$(basename "$(dirname "$FARRO_JOB_DIR")")
echo "start $FARRO_JOB_ID $FARRO_CLAIM_TOKEN $FARRO_ATTEMPT $agent $(date +%s%N)" >> "$RUNS"
case "$prompt" in *long*) sleep "$LONG" 9>&-;; *) sleep "$SLEEP" 9>&-;; esac
echo "end $FARRO_JOB_ID $FARRO_CLAIM_TOKEN" >> "$RUNS"
case "$prompt" in *fail*) if [ "$FARRO_ATTEMPT" = 1 ]; then echo "failing on purpose" >&2; exit 7; fi;; esac
exit 0
`

// execution is one run of a job's handler, from the runs file.
type execution struct {
	token, attempt, agent string
	started               time.Time
	ended                 bool
}

// freeze is an agent stopped (SIGSTOP) from from to to.
type freeze struct {
	agent    string
	from, to time.Time
}

// unixNano parses a handler's timestamp.
func unixNano(s string) (time.Time, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, n), err == nil
}

// report is the checker's verdict on a storm. The zero-tolerance counts:
//
//   - lost: a submitted job whose row is gone;
//   - duplicated: a job that succeeded more than once (more than one
//     move to succeeded in its history), or whose succeeded claim never
//     ran its handler to the end (a commit without its execution);
//   - overlaps: two executions of one job at the same time (the second
//     found the first's lock held), except those whose holder's agent
//     was frozen while the holder ran (freezeOverlaps, counted apart);
//   - stuck: a job not terminal at the end;
//   - overMax: a job with more attempts, or more executions, than its
//     max_attempts;
//   - notSucceeded: a terminal job that did not succeed (no job in a
//     storm should run out of attempts);
//   - malformed: a runs line the checker cannot place (an end without
//     its start, a start of one claim twice).
type report struct {
	jobs, executions, reruns, retried, recovered               int
	lost, duplicated, overlaps, freezeOverlaps, stuck, overMax int
	notSucceeded, malformed                                    int
	problems                                                   []string
}

func (r *report) problem(format string, args ...any) {
	if len(r.problems) < 20 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// zero reports whether every zero-tolerance count is zero.
func (r *report) zero() bool {
	return r.lost+r.duplicated+r.overlaps+r.freezeOverlaps+r.stuck+r.overMax+r.notSucceeded+r.malformed == 0
}

func (r *report) counts() string {
	return fmt.Sprintf("lost=%d duplicated=%d overlaps=%d freeze_overlaps=%d stuck=%d over_max_attempts=%d not_succeeded=%d malformed=%d",
		r.lost, r.duplicated, r.overlaps, r.freezeOverlaps, r.stuck, r.overMax, r.notSucceeded, r.malformed)
}

// check reads the runs file and every submitted job's row and history.
// freezes are a freeze storm's.
func check(ctx context.Context, st *pgstore.Store, runs string, ids []string, freezes []freeze) (*report, error) {
	r := &report{jobs: len(ids)}
	perJob := map[string][]*execution{}
	byToken := map[string]*execution{}
	var overlapLines [][]string
	f, err := os.Open(runs)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if f != nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			w := strings.Fields(sc.Text())
			switch {
			case len(w) == 6 && w[0] == "start":
				at, ok := unixNano(w[5])
				if byToken[w[2]] != nil || !ok {
					r.malformed++
					r.problem("job %s: claim %s started twice, or at no time", w[1], w[2])
					continue
				}
				e := &execution{token: w[2], attempt: w[3], agent: w[4], started: at}
				byToken[w[2]] = e
				perJob[w[1]] = append(perJob[w[1]], e)
				r.executions++
			case len(w) == 3 && w[0] == "end":
				e := byToken[w[2]]
				if e == nil {
					r.malformed++
					r.problem("job %s: end of claim %s, never started", w[1], w[2])
					continue
				}
				e.ended = true
			case len(w) == 5 && w[0] == "overlap":
				overlapLines = append(overlapLines, w)
			default:
				r.malformed++
				r.problem("bad line in the runs file: %q", sc.Text())
			}
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	for _, w := range overlapLines {
		at, _ := unixNano(w[4])
		if h := byToken[w[3]]; h != nil && frozenWhile(freezes, h.agent, h.started, at) {
			r.freezeOverlaps++
			r.problem("job %s: claim %s ran while claim %s, whose agent %s was frozen since it started, still ran", w[1], w[2], w[3], h.agent)
			continue
		}
		r.overlaps++
		r.problem("job %s: claim %s ran while claim %s still ran", w[1], w[2], w[3])
	}
	for _, id := range ids {
		es := perJob[id]
		if len(es) > 1 {
			r.reruns += len(es) - 1
		}
		j, err := st.Get(ctx, id)
		if errors.Is(err, job.ErrNotFound) {
			r.lost++
			r.problem("%s: lost (no row)", id)
			continue
		}
		if err != nil {
			return nil, err
		}
		if !j.Status.Terminal() {
			r.stuck++
			r.problem("%s: stuck in %s", id, j.Status)
			continue
		}
		if j.Status != job.Succeeded {
			r.notSucceeded++
			r.problem("%s: %s after %d attempts (%s)", id, j.Status, j.Attempts, j.Reason)
		}
		if j.MaxAttempts > 0 && (j.Attempts > j.MaxAttempts || len(es) > j.MaxAttempts) {
			r.overMax++
			r.problem("%s: %d attempts, %d executions, max %d", id, j.Attempts, len(es), j.MaxAttempts)
		}
		hist, err := st.History(ctx, id)
		if err != nil {
			return nil, err
		}
		succ := 0
		for _, ev := range hist {
			if ev.To == job.Succeeded {
				succ++
			}
			if ev.From == job.Failed && ev.To == job.Deferred {
				r.retried++
			}
			if ev.From == job.InProgress && ev.To == job.Stale {
				r.recovered++
			}
		}
		if j.Status == job.Succeeded {
			if e := byToken[j.ClaimToken]; e == nil || !e.ended || !containsExec(es, e) {
				succ++ // a commit no execution of its claim backs: as bad as a second success
				r.problem("%s: succeeded by claim %s, whose handler never ran to its end", id, j.ClaimToken)
			}
		}
		if succ > 1 {
			r.duplicated++
			r.problem("%s: succeeded %d times", id, succ)
		}
	}
	return r, nil
}

// frozenWhile reports whether agent was frozen at some time between from
// and to.
func frozenWhile(freezes []freeze, agent string, from, to time.Time) bool {
	for _, f := range freezes {
		if f.agent == agent && f.from.Before(to) && f.to.After(from) {
			return true
		}
	}
	return false
}

func containsExec(es []*execution, e *execution) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}
