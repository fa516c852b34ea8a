package farrob

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/farro-dev/farro/bench/internal/stats"
	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/pkg/job"
)

// PickupResult is farro's pickup latency on an idle queue, from the start
// of Spool.Submit to
//   - Claim: the job's directory appearing in in-progress/<agent>/ (the
//     claim's rename; inotify), and
//   - Start: the exec handler running (it writes the job id into a FIFO
//     the benchmark reads).
type PickupResult struct {
	Claim, Start stats.Latency
	Submit       stats.Latency // Submit's own duration (its fsyncs)
}

// Pickup starts watchdogd, managerd and one agentd (--concurrency 4,
// default settings) on an empty spool whose exec handler is
// `/bin/sh -c 'printf "%s\n" "$FARRO_JOB_ID" > FIFO'`, then submits one
// exec job at a time through pkg/job and times its pickup; each probe
// waits until the previous job has succeeded plus stats.ProbeGap, so the
// queue is idle when the next is submitted.
func (b Bins) Pickup(base, logDir string, probes int) (PickupResult, error) {
	root, s, err := newSpool(base, "farro-pickup-")
	if err != nil {
		return PickupResult{}, err
	}
	defer sys.RemoveTree(root)
	fifo := filepath.Join(root, "started.fifo")
	ff, started, err := readStamps(fifo)
	if err != nil {
		return PickupResult{}, err
	}
	defer ff.Close()

	sup, err := b.StartSupport(s.Root, logDir)
	if err != nil {
		return PickupResult{}, err
	}
	defer sup.Stop()
	const agentID = "p1"
	a, err := b.Agent(s.Root, logDir, agentID, 4, []string{"/bin/sh", "-c", `printf '%s\n' "$FARRO_JOB_ID" > ` + fifo})
	if err != nil {
		return PickupResult{}, err
	}
	defer a.Stop(syscall.SIGTERM, 10*time.Second)
	if _, err := WaitReady(a); err != nil {
		return PickupResult{}, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return PickupResult{}, err
	}
	defer w.Close()
	if err := w.Add(s.AgentDir(agentID)); err != nil {
		return PickupResult{}, err
	}
	claimed := make(chan stamp, 16)
	go func() {
		for ev := range w.Events {
			if ev.Has(fsnotify.Create) {
				claimed <- stamp{id: filepath.Base(ev.Name), t: time.Now()}
			}
		}
	}()

	var claimLat, startLat, subLat []time.Duration
	for i := 0; i < probes; i++ {
		t0 := time.Now()
		j, err := s.Submit(job.SubmitRequest{Kind: "exec", Prompt: []byte(`{}`), Actor: "bench"})
		if err != nil {
			return PickupResult{}, err
		}
		subLat = append(subLat, time.Since(t0))
		var gotClaim, gotStart bool
		timeout := time.After(10 * time.Second)
		for !gotClaim || !gotStart {
			select {
			case c := <-claimed:
				if c.id == j.ID {
					claimLat, gotClaim = append(claimLat, c.t.Sub(t0)), true
				}
			case st := <-started:
				if st.id == j.ID {
					startLat, gotStart = append(startLat, st.t.Sub(t0)), true
				}
			case <-timeout:
				return PickupResult{}, fmt.Errorf("pickup: job %s not started within 10s (logs in %s)", j.ID, logDir)
			}
		}
		if err := waitExists(s.JobDir(job.Succeeded, "", j.ID), 10*time.Second); err != nil {
			return PickupResult{}, err
		}
		time.Sleep(stats.ProbeGap())
	}
	return PickupResult{Claim: stats.Lat(claimLat), Start: stats.Lat(startLat), Submit: stats.Lat(subLat)}, nil
}

type stamp struct {
	id string
	t  time.Time
}

func waitExists(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Lstat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %s", path, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// readStamps reads one job ID per line from the FIFO at path (opened
// O_RDWR: never EOF between writers) and sends each with the time it was
// read. The caller closes the returned file.
func readStamps(path string) (*os.File, <-chan stamp, error) {
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, nil, err
	}
	ff, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	started := make(chan stamp, 16)
	go func() {
		sc := bufio.NewScanner(ff)
		for sc.Scan() {
			started <- stamp{id: strings.TrimSpace(sc.Text()), t: time.Now()}
		}
	}()
	return ff, started, nil
}
