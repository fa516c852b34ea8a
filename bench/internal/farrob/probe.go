package farrob

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/pkg/job"
)

// EventTime returns the time of job id's first transition into state to
// at or after since, as recorded in its events.jsonl by the process that
// made it (the exact moment, whatever the benchmark's polling). ok is
// false while there is none yet, or while the job is between two
// directories.
func EventTime(s *job.Spool, id string, to job.State, since time.Time) (time.Time, bool) {
	locs, err := s.Locate(id)
	if err != nil {
		return time.Time{}, false
	}
	for _, loc := range locs {
		evs, _, err := job.ReadEvents(loc.Dir)
		if err != nil {
			continue
		}
		for _, ev := range evs {
			if ev.To == to && !ev.Time.Before(since) {
				return ev.Time, true
			}
		}
	}
	return time.Time{}, false
}

// WaitEvent polls EventTime every few milliseconds until the transition
// is recorded, p exits, or timeout passes.
func WaitEvent(s *job.Spool, id string, to job.State, p *sys.Proc, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		if t, ok := EventTime(s, id, to, p.Started); ok {
			return t, nil
		}
		if p.Exited() {
			return time.Time{}, fmt.Errorf("%s exited before job %s went to %s (log %s)", p.Name, id, to, p.Log)
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("job %s not in %s within %s of %s's start (log %s)", id, to, timeout, p.Name, p.Log)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// FirstTransition returns the job_id of the first state_transition line
// to state to in the daemon log at path (farro's JSON lines); ok is false
// when there is none yet.
func FirstTransition(path string, to job.State) (id string, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"state_transition"`)) {
			continue
		}
		var l struct {
			JobID string `json:"job_id"`
			Event struct {
				Type string `json:"type"`
				To   string `json:"to"`
			} `json:"event"`
		}
		if json.Unmarshal(line, &l) != nil || l.Event.Type != "state_transition" || l.Event.To != string(to) {
			continue
		}
		return l.JobID, true, nil
	}
	return "", false, sc.Err()
}

// IdleCPU measures the CPU time (utime+stime) each process spends over
// window, as milliseconds per second of the window.
func IdleCPU(window time.Duration, ps ...*sys.Proc) ([]float64, error) {
	before := make([]time.Duration, len(ps))
	for i, p := range ps {
		c, err := sys.CPUTime(p.PID())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		before[i] = c
	}
	t0 := time.Now()
	time.Sleep(window) // the window itself: the daemons run their periodic passes meanwhile
	el := time.Since(t0)
	out := make([]float64, len(ps))
	for i, p := range ps {
		if p.Exited() {
			return nil, fmt.Errorf("%s exited during the idle window (log %s)", p.Name, p.Log)
		}
		c, err := sys.CPUTime(p.PID())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		out[i] = float64(c-before[i]) / float64(time.Millisecond) / el.Seconds()
	}
	return out, nil
}

// MemDetail is pid's peak and current RSS and the current RSS split into
// anonymous memory (the heap) and file pages (the binary), from
// /proc/PID/status, for the log: where a daemon's memory goes.
func MemDetail(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		for _, k := range []string{"VmHWM:", "VmRSS:", "RssAnon:", "RssFile:"} {
			if bytes.HasPrefix(line, []byte(k)) {
				out = append(out, k+" "+string(bytes.Join(bytes.Fields(line[len(k):]), []byte(" "))))
			}
		}
	}
	return strings.Join(out, ", ")
}
