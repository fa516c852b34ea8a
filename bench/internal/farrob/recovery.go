package farrob

import (
	"fmt"
	"os"
	"time"

	"github.com/farro-dev/farro/bench/internal/stats"
	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/pkg/job"
)

// Recovery measures how long a job held by a SIGKILLed agent takes to be
// claimed again, with every daemon at its default settings. Two agents run
// an exec handler `sleep 30`; one job (max_attempts 1000) is submitted.
// Each probe finds the agent holding the job (job.json in-progress in
// in-progress/<agent>/), SIGKILLs it (its handler dies with it), and polls
// every millisecond until the job is in in-progress/ of the other agent;
// then the killed agent is restarted (same id) for the next probe, which
// kills the other one. The time runs from the SIGKILL to the new claim's
// rename: watchdogd's detection (pid gone), its move to stale/, managerd's
// requeue to incoming/, and the surviving agent's claim.
func (b Bins) Recovery(base, logDir string, kills int) (stats.Latency, error) {
	root, s, err := newSpool(base, "farro-recovery-")
	if err != nil {
		return stats.Latency{}, err
	}
	defer sys.RemoveTree(root)
	sup, err := b.StartSupport(s.Root, logDir)
	if err != nil {
		return stats.Latency{}, err
	}
	defer sup.Stop()
	ids := []string{"r1", "r2"}
	agents := map[string]*sys.Proc{}
	defer func() {
		// SIGKILL: a SIGTERMed agent would wait for its 'sleep 30'.
		for _, a := range agents {
			a.Kill()
		}
	}()
	start := func(id string) error {
		a, err := b.Agent(s.Root, logDir, id, 1, []string{"sleep", "30"})
		if err != nil {
			return err
		}
		agents[id] = a
		_, err = WaitReady(a)
		return err
	}
	for _, id := range ids {
		if err := start(id); err != nil {
			return stats.Latency{}, err
		}
	}
	j, err := s.Submit(job.SubmitRequest{Kind: "exec", Prompt: []byte(`{}`), MaxAttempts: 1000, Actor: "bench"})
	if err != nil {
		return stats.Latency{}, err
	}
	holder := func(timeout time.Duration, not string) (string, error) {
		deadline := time.Now().Add(timeout)
		for time.Now().Before(deadline) {
			for _, id := range ids {
				if id == not {
					continue
				}
				if jj, err := job.ReadJob(s.JobDir(job.InProgress, id, j.ID)); err == nil && jj.Status == job.InProgress {
					return id, nil
				}
			}
			time.Sleep(time.Millisecond)
		}
		return "", fmt.Errorf("recovery: job %s not held by an agent within %s (logs in %s)", j.ID, timeout, logDir)
	}
	var lat []time.Duration
	for k := 0; k < kills; k++ {
		h, err := holder(30*time.Second, "")
		if err != nil {
			return stats.Latency{}, err
		}
		time.Sleep(50 * time.Millisecond) // the handler is running
		other := ids[0]
		if h == ids[0] {
			other = ids[1]
		}
		t0 := time.Now()
		agents[h].Kill()
		dst := s.JobDir(job.InProgress, other, j.ID)
		deadline := t0.Add(2 * time.Minute)
		for {
			if _, err := os.Lstat(dst); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return stats.Latency{}, fmt.Errorf("recovery: job %s not claimed again within 2m after SIGKILL of %s (logs in %s)", j.ID, h, logDir)
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(t0))
		if err := start(h); err != nil {
			return stats.Latency{}, err
		}
	}
	return stats.Lat(lat), nil
}
