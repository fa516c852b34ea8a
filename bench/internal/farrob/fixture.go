package farrob

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/pkg/job"
)

// Fill puts n jobs of the given kind into state st of spool s, writing the
// same three files Spool.Submit writes (prompt.json, job.json with
// pkg/job's own marshalling, events.jsonl), but without Submit's per-job
// fsyncs: one syncfs at the end makes them durable. It is the benchmark's
// way to queue jobs before a burn-down or a scale run starts the clock
// (Submit itself is measured in the insert figures). IDs have the shape
// of generated ones and sort by creation time.
func Fill(s *job.Spool, n int, kind string, st job.State, maxAttempts int) ([]string, error) {
	return fill(s, n, kind, st, maxAttempts, nil)
}

// FillDeferred puts n jobs of kind into deferred/, each not to run before
// notBefore, the way Fill puts jobs into other states.
func FillDeferred(s *job.Spool, n int, kind string, notBefore time.Time) ([]string, error) {
	nb := notBefore.UTC()
	return fill(s, n, kind, job.Deferred, 0, &nb)
}

func fill(s *job.Spool, n int, kind string, st job.State, maxAttempts int, notBefore *time.Time) ([]string, error) {
	base := time.Now().UTC().Add(-time.Duration(n) * time.Microsecond)
	ids := make([]string, n)
	for i := range ids {
		t := base.Add(time.Duration(i) * time.Microsecond)
		ids[i] = t.Format("20060102T150405.000000Z") + fmt.Sprintf("-%06x", i&0xffffff)
	}
	var wg sync.WaitGroup
	var firstErr atomic.Value
	const par = 4
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += par {
				if err := writeJob(s, ids[i], base.Add(time.Duration(i)*time.Microsecond), kind, st, maxAttempts, notBefore); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, err
	}
	return ids, sys.Syncfs(s.Root)
}

func writeJob(s *job.Spool, id string, created time.Time, kind string, st job.State, maxAttempts int, notBefore *time.Time) error {
	j := &job.Job{
		SchemaVersion: job.SchemaVersion, ID: id, Kind: kind, Status: st,
		MaxAttempts: maxAttempts, CreatedAt: created, UpdatedAt: created, NotBefore: notBefore,
	}
	events := []job.Event{{Time: created, Actor: "bench", To: job.Queued, Reason: "submitted"}}
	if st == job.Deferred {
		j.Reason = "scheduled"
		events[0].To = job.Deferred
	}
	if st == job.Succeeded {
		fin := created.Add(time.Millisecond)
		j.Attempts, j.Agent, j.CorrelationID = 1, "bench", id+"/1-000000"
		j.StartedAt, j.LastHeartbeat, j.FinishedAt, j.UpdatedAt = &created, &created, &fin, fin
		events = append(events,
			job.Event{Time: created, Actor: "agentd/bench", From: job.Queued, To: job.InProgress, Attempt: 1, CorrelationID: j.CorrelationID},
			job.Event{Time: fin, Actor: "agentd/bench", From: job.InProgress, To: job.Succeeded, Attempt: 1, CorrelationID: j.CorrelationID})
	}
	dir := s.JobDir(st, "", id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	var ev []byte
	for _, e := range events {
		b, _ := json.Marshal(e)
		ev = append(append(ev, b...), '\n')
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{job.PromptFile, []byte("{}")}, {job.JobFile, j.Marshal()}, {job.EventsFile, ev}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// CountDir counts the entries of dir that are not dot files or locks.
func CountDir(dir string) (int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(4096)
		for _, nm := range names {
			if nm != "" && nm[0] != '.' {
				n++
			}
		}
		if err != nil || len(names) == 0 {
			return n, nil
		}
	}
}

// CountJobDirs counts the job directories in dir cheaply enough to be
// polled every few milliseconds beside the daemons it measures: a
// directory's link count is 2 plus its subdirectories (ext4, tmpfs), one
// stat instead of a listing of every entry (which, every 10 ms over a
// growing completed/ dir, cost the machine a good part of a core). The
// listing is taken once the count says want is reached (to confirm), and
// whenever the link count is not usable (ext4 reports 1 past 65,000
// subdirectories).
func CountJobDirs(dir string, want int) (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, err
	}
	if st.Nlink >= 2 && int(st.Nlink-2) < want {
		return int(st.Nlink - 2), nil
	}
	return CountDir(dir)
}
