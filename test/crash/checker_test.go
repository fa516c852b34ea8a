package crash

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
)

// ledger is the client's side of the history, as Jepsen keeps it: every
// job a client tried to submit (attempted), the ones whose submit was
// acknowledged (farroctl printed the ID: from then on the job must never
// be lost), the entries planted in the spool on purpose (corrupt jobs,
// expected in corrupt/), and the jobs retention was asked to remove.
type ledger struct {
	mu        sync.Mutex
	attempted map[string]bool
	acks      map[string]bool
	planted   map[string]bool
	expired   map[string]bool
	retried   map[string]int // farroctl retry runs: each may add a terminal record
}

func newLedger() *ledger {
	return &ledger{attempted: map[string]bool{}, acks: map[string]bool{}, planted: map[string]bool{}, expired: map[string]bool{}, retried: map[string]int{}}
}

func (l *ledger) attempt(id string) { l.set(l.attempted, id) }
func (l *ledger) ack(id string)     { l.set(l.acks, id) }
func (l *ledger) plant(id string)   { l.set(l.planted, id) }
func (l *ledger) expire(id string)  { l.set(l.expired, id) }

// retry notes an operator's retry of id: a job run again after a
// terminal state may have one more terminal record in events.jsonl.
func (l *ledger) retry(id string) {
	l.mu.Lock()
	l.retried[id]++
	l.mu.Unlock()
}

func (l *ledger) set(m map[string]bool, id string) {
	l.mu.Lock()
	m[id] = true
	l.mu.Unlock()
}

func (l *ledger) isExpired(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expired[id]
}

func (l *ledger) acked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.acks))
	for id := range l.acks {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func (l *ledger) counts() (attempted, acked int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.attempted), len(l.acks)
}

// violations are the checker's counts. Every one must be zero.
type violations struct {
	Lost        int // acknowledged, but found in no state directory
	Duplicated  int // found in two places, or with two terminal records
	Unexpected  int // a job nobody submitted
	Concurrent  int // two executions of one job alive at the same time
	Unreadable  int // job.json that does not parse, or a submitted job quarantined
	OrphanLocks int // claim locks left after recovery
	OrphanTemps int // temp files of atomic writes, or tmp/ entries, left after recovery
	NotTerminal int // jobs not terminal once the system is quiet
	Attempts    int // attempts that do not match the handler's executions
}

func (v *violations) add(o violations) {
	v.Lost += o.Lost
	v.Duplicated += o.Duplicated
	v.Unexpected += o.Unexpected
	v.Concurrent += o.Concurrent
	v.Unreadable += o.Unreadable
	v.OrphanLocks += o.OrphanLocks
	v.OrphanTemps += o.OrphanTemps
	v.NotTerminal += o.NotTerminal
	v.Attempts += o.Attempts
}

func (v violations) total() int {
	return v.Lost + v.Duplicated + v.Unexpected + v.Concurrent + v.Unreadable + v.OrphanLocks + v.OrphanTemps + v.NotTerminal + v.Attempts
}

func (v violations) String() string {
	return fmt.Sprintf("lost=%d duplicated=%d unexpected=%d concurrent=%d unreadable=%d orphan_locks=%d orphan_temps=%d not_terminal=%d attempt_mismatch=%d",
		v.Lost, v.Duplicated, v.Unexpected, v.Concurrent, v.Unreadable, v.OrphanLocks, v.OrphanTemps, v.NotTerminal, v.Attempts)
}

// checkReport is what one check found: the counts, one line per finding,
// and how many jobs were looked at.
type checkReport struct {
	violations
	jobs     int
	findings []string
	runStats
}

// runStats are the handler executions the checker saw: all of them, the
// reruns (executions after a job's first), the overlapping ones (each
// execution that began while another of its job was still alive: the
// pairs behind the Concurrent count, which counts jobs) and those with no
// end record (SIGKILLed: whether they outlived a later start of their job
// is the kernel's word, the later one's flock).
type runStats struct {
	executions, reruns, overlapRuns, unended int
}

func (s *runStats) count(execs []run) {
	s.executions += len(execs)
	if len(execs) > 1 {
		s.reruns += len(execs) - 1
	}
	s.overlapRuns += len(overlappedRuns(execs))
	for _, e := range execs {
		if e.end == 0 {
			s.unended++
		}
	}
}

func (r *checkReport) found(counter *int, format string, args ...any) {
	*counter++
	r.findings = append(r.findings, fmt.Sprintf(format, args...))
}

// checkSpool counts the invariant violations of a quiet spool against the
// ledger and the handler's records (records: the CRASHTEST_RECORDS dir).
// It only reads.
func checkSpool(s *job.Spool, records string, l *ledger) checkReport {
	var r checkReport
	where := map[string][]job.Location{}
	tempFile := func(path string) { r.found(&r.OrphanTemps, "temp file left behind: %s", rel(s, path)) }

	// Every state directory: job dirs, locks, temp files.
	for _, st := range job.States {
		dirs := []string{s.StateDir(st)}
		if st == job.InProgress {
			dirs = nil
			ents, _ := os.ReadDir(s.StateDir(st))
			for _, e := range ents {
				p := filepath.Join(s.StateDir(st), e.Name())
				switch {
				case strings.HasPrefix(e.Name(), "."):
					tempFile(p)
				case e.IsDir():
					dirs = append(dirs, p)
				}
			}
		}
		for _, d := range dirs {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				name, p := e.Name(), filepath.Join(d, e.Name())
				switch {
				case st == job.InProgress && name == job.PoolDir && e.IsDir():
					// The agent's spare lock directories (fsq.LockPool):
					// its own, cleared when it starts again.
				case st == job.Queued && name == job.PriorityHintDir && e.IsDir():
					// Priority hints (written by submit, made durable
					// by its barrier): empty files named <priority>.<id>.
					hints, _ := os.ReadDir(p)
					for _, h := range hints {
						if _, _, ok := job.ParseHint(h.Name()); !ok || !h.Type().IsRegular() {
							tempFile(filepath.Join(p, h.Name()))
						}
					}
				case strings.HasPrefix(name, "."):
					tempFile(p)
				case st == job.Queued && strings.HasSuffix(name, job.LockSuffix):
					r.found(&r.OrphanLocks, "lock left behind: %s", rel(s, p))
				default:
					loc := job.Location{State: st, Dir: p}
					if st == job.InProgress {
						loc.Agent = filepath.Base(d)
					}
					where[name] = append(where[name], loc)
					// Temp files inside the job directory.
					inner, _ := os.ReadDir(p)
					for _, f := range inner {
						if strings.HasPrefix(f.Name(), ".") {
							tempFile(filepath.Join(p, f.Name()))
						}
					}
				}
			}
		}
	}
	tmp, _ := os.ReadDir(s.Path(job.TmpDir))
	for _, e := range tmp {
		r.found(&r.OrphanTemps, "tmp/ entry left behind: %s", e.Name())
	}
	// corrupt/: only what was planted may be there.
	corrupt, _ := os.ReadDir(s.Path(job.CorruptDir))
	for _, e := range corrupt {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			tempFile(s.Path(job.CorruptDir, name))
			continue
		}
		id, _, _ := strings.Cut(name, ".")
		l.mu.Lock()
		planted := l.planted[id]
		l.mu.Unlock()
		if !planted && !strings.HasSuffix(name, ".quarantine.json") {
			r.found(&r.Unreadable, "job quarantined to corrupt/: %s", name)
		}
	}

	l.mu.Lock()
	attempted, acks, expired, planted := copySet(l.attempted), copySet(l.acks), copySet(l.expired), copySet(l.planted)
	retried := make(map[string]int, len(l.retried))
	for id, n := range l.retried {
		retried[id] = n
	}
	l.mu.Unlock()

	ids := make([]string, 0, len(where))
	for id := range where {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		locs := where[id]
		r.jobs++
		if !attempted[id] {
			if planted[id] {
				r.found(&r.NotTerminal, "planted corrupt job %s still in %s/ (not quarantined)", id, locs[0].State.Dir())
			} else {
				r.found(&r.Unexpected, "job %s was never submitted (in %s/)", id, locs[0].State.Dir())
			}
			continue
		}
		if expired[id] {
			r.found(&r.NotTerminal, "job %s should have been removed by retention (in %s/)", id, locs[0].State.Dir())
			continue
		}
		if len(locs) > 1 {
			var dirs []string
			for _, lc := range locs {
				dirs = append(dirs, rel(s, lc.Dir))
			}
			r.found(&r.Duplicated, "job %s is in %d places: %s", id, len(locs), strings.Join(dirs, ", "))
			continue
		}
		loc := locs[0]
		j, err := job.ReadJob(loc.Dir)
		if err != nil {
			r.found(&r.Unreadable, "job %s: %v", id, err)
			continue
		}
		if !loc.State.Terminal() {
			r.found(&r.NotTerminal, "job %s is %s (job.json says %s, reason %q)", id, loc.State, j.Status, j.Reason)
			continue
		}
		if j.Status != loc.State {
			r.found(&r.NotTerminal, "job %s is in %s/ but job.json says %s", id, loc.State.Dir(), j.Status)
			continue
		}
		evs, err := readEvents(loc.Dir)
		if err != nil {
			r.found(&r.Unreadable, "job %s: events.jsonl: %v", id, err)
			continue
		}
		terminal := 0
		for _, ev := range evs {
			if ev.To.Terminal() {
				terminal++
			}
		}
		if terminal > 1+retried[id] {
			r.found(&r.Duplicated, "job %s has %d terminal records in events.jsonl", id, terminal)
		}
		execs, err := loadExecutions(records, id)
		if err != nil {
			r.found(&r.Unreadable, "job %s: handler records: %v", id, err)
			continue
		}
		r.count(execs)
		if msg := overlapping(execs); msg != "" {
			r.found(&r.Concurrent, "job %s: %s", id, msg)
		}
		if msg := attemptsMismatch(j, execs); msg != "" {
			r.found(&r.Attempts, "job %s: %s", id, msg)
		}
	}
	for id := range acks {
		if _, ok := where[id]; !ok && !expired[id] {
			r.found(&r.Lost, "acknowledged job %s is in no state directory", id)
		}
	}
	sort.Strings(r.findings)
	return r
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func rel(s *job.Spool, p string) string {
	if r, err := filepath.Rel(s.Root, p); err == nil {
		return r
	}
	return p
}

func readEvents(dir string) ([]job.Event, error) {
	f, err := os.Open(filepath.Join(dir, job.EventsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []job.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev job.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return out, fmt.Errorf("line %d: %w", len(out)+1, err)
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}

// run is one handler execution, from the handler's own records.
type run struct {
	start, end int64 // unix ns; end 0: it never recorded one (SIGKILLed)
	// CLOCK_MONOTONIC ns of the same instants (0: a record without it);
	// compared in preference to the wall clock.
	monoStart, monoEnd int64
	signal             string // the end was recorded on this signal (TERM)
	pid, ppid          int
	attempt            int
	corr               string // the claim's correlation id
	overlap            bool   // it found the job's flock held by another live execution
	overlapUS          int64  // for how long the other one kept it
	failed             bool
}

func loadExecutions(records, id string) ([]run, error) {
	f, err := os.Open(filepath.Join(records, id+".jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	open := map[int]*run{}
	var out []run
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			Event   string `json:"event"`
			NS      int64  `json:"ns"`
			Mono    int64  `json:"mono_ns"`
			Signal  string `json:"signal"`
			PID     int    `json:"pid"`
			PPID    int    `json:"ppid"`
			Attempt int    `json:"attempt"`
			Corr    string `json:"correlation_id"`
			Overlap bool   `json:"overlap"`
			OverUS  int64  `json:"overlap_us"`
			Failed  bool   `json:"failed"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, err
		}
		switch rec.Event {
		case "start":
			open[rec.PID] = &run{start: rec.NS, monoStart: rec.Mono, pid: rec.PID, ppid: rec.PPID, attempt: rec.Attempt, corr: rec.Corr, overlap: rec.Overlap, overlapUS: rec.OverUS}
		case "end":
			if e := open[rec.PID]; e != nil {
				e.end, e.monoEnd, e.failed, e.signal = rec.NS, rec.Mono, rec.Failed, rec.Signal
				out = append(out, *e)
				delete(open, rec.PID)
			}
		}
	}
	for _, e := range open {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out, sc.Err()
}

// overlapping says how two executions of one job were alive at once, or
// "" if none were (the first of overlappedRuns).
func overlapping(execs []run) string {
	over := overlappedRuns(execs)
	if len(over) == 0 {
		return ""
	}
	i := over[0]
	e := execs[i]
	if e.overlap {
		return fmt.Sprintf("execution %d (pid %d, attempt %d) started while another execution was alive (flock held for %dµs more)", i+1, e.pid, e.attempt, e.overlapUS)
	}
	for k := i - 1; k >= 0; k-- {
		if startedBeforeEnd(e, execs[k]) {
			return fmt.Sprintf("execution %d started %dµs before execution %d ended", i+1, endGap(e, execs[k])/1000, k+1)
		}
	}
	return fmt.Sprintf("execution %d overlapped an earlier one", i+1)
}

// overlappedRuns returns the index of every execution (sorted by start)
// that began while an earlier execution of its job was still alive: it
// found the job's flock taken (the kernel's word, which also covers an
// earlier execution without an end record), or it started before an
// earlier one recorded its end.
func overlappedRuns(execs []run) []int {
	var out []int
	for i, e := range execs {
		over := e.overlap
		for k := 0; k < i && !over; k++ {
			over = startedBeforeEnd(e, execs[k])
		}
		if over {
			out = append(out, i)
		}
	}
	return out
}

// startedBeforeEnd reports whether e started before prev (which started
// earlier) recorded its end, on the monotonic clock when both records
// have it.
func startedBeforeEnd(e, prev run) bool {
	return prev.end != 0 && endGap(e, prev) > 0
}

// endGap is how long before prev's end e started (ns; <= 0: after).
func endGap(e, prev run) int64 {
	if e.monoStart != 0 && prev.monoEnd != 0 {
		return prev.monoEnd - e.monoStart
	}
	return prev.end - e.start
}

// attemptsMismatch checks job.json's attempts against the executions.
// Every claim counts one attempt (attempts+1, a new correlation id) and
// runs the handler at most once; only a graceful release (in-progress ->
// queued on drain) gives its attempt back. So, in start order: no two
// executions share a correlation id, attempt numbers never go down, none
// is above attempts+1 (+1: the job was released after it), and a
// succeeded job's last attempt is an execution that ended successfully.
// (events.jsonl is not used: it is history, and a crash between a commit's
// status write and its event append legitimately loses a line.)
func attemptsMismatch(j *job.Job, execs []run) string {
	if j.Kind != "exec" {
		return ""
	}
	claims := map[string]int{}
	prev := 0
	for i, e := range execs {
		if e.corr != "" {
			if k, ok := claims[e.corr]; ok {
				return fmt.Sprintf("executions %d and %d ran for one claim (correlation id %s)", k+1, i+1, e.corr)
			}
			claims[e.corr] = i
		}
		if e.attempt < 1 || e.attempt > j.Attempts+1 {
			return fmt.Sprintf("execution %d ran as attempt %d; job.json says %d attempts", i+1, e.attempt, j.Attempts)
		}
		if e.attempt < prev {
			return fmt.Sprintf("attempts went backwards: execution %d ran as attempt %d after attempt %d", i+1, e.attempt, prev)
		}
		prev = e.attempt
	}
	if j.Status == job.Succeeded {
		ok := false
		for _, e := range execs {
			if e.end != 0 && !e.failed && e.attempt == j.Attempts {
				ok = true
			}
		}
		if !ok {
			return fmt.Sprintf("succeeded at attempt %d, but no execution of that attempt ended successfully", j.Attempts)
		}
	}
	return ""
}

// dumpJobs logs every job's final state, reason, attempts and events
// (FARRO_CRASH_DEBUG=1), to see what a scenario did.
func dumpJobs(t testing.TB, s *job.Spool, records string) {
	cen := takeCensusQuiet(s)
	ids := make([]string, 0, len(cen.where))
	for id := range cen.where {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		sts := cen.where[id]
		locs, _ := s.Locate(id)
		if len(locs) == 0 {
			continue
		}
		j, err := job.ReadJob(locs[0].Dir)
		if err != nil {
			t.Logf("%-4s %v: %v", id, sts, err)
			continue
		}
		evs, _ := readEvents(locs[0].Dir)
		var path []string
		for _, ev := range evs {
			path = append(path, string(ev.To))
		}
		execs, _ := loadExecutions(records, id)
		t.Logf("%-4s %-10s attempts=%d execs=%d reason=%q path=%s", id, j.Status, j.Attempts, len(execs), j.Reason, strings.Join(path, ">"))
	}
}
