package farrob

import (
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// Step is one filesystem step of farro's claim or commit, with its mean
// wall time per job (from the step's start to the next step's start, so
// the CPU work after a step is charged to it).
type Step struct {
	Name  string
	Count float64 // per job
	Mean  time.Duration
}

// Steps runs n queued jobs through pkg/job's Claim and Commit(succeeded)
// in one goroutine, no daemon running, and times each filesystem step
// through pkg/fsq's observer hook. It returns the steps in order of
// first appearance and the mean total per job.
func Steps(base string, n int) ([]Step, time.Duration, error) {
	root, s, err := newSpool(base, "farro-steps-")
	if err != nil {
		return nil, 0, err
	}
	defer sys.RemoveTree(root)
	ids, err := Fill(s, n, "noop", job.Queued, 0)
	if err != nil {
		return nil, 0, err
	}
	type acc struct {
		d     time.Duration
		count int
		first int
	}
	steps := map[string]*acc{}
	var phase, cur string
	var curStart time.Time
	seq := 0
	closeCur := func(now time.Time) {
		if cur == "" {
			return
		}
		a := steps[cur]
		if a == nil {
			a = &acc{first: seq}
			seq++
			steps[cur] = a
		}
		a.d += now.Sub(curStart)
		a.count++
		cur = ""
	}
	fsq.SetObserver(func(op fsq.Op, path, path2 string) {
		now := time.Now()
		closeCur(now)
		cur, curStart = phase+": "+stepName(s.Root, op, path, path2), now
	})
	defer fsq.SetObserver(nil)
	h := job.Holder{Actor: "bench/steps", Agent: "steps"}
	start := time.Now()
	for _, id := range ids {
		phase = "claim"
		c, err := s.Claim(id, h)
		closeCur(time.Now())
		if err != nil {
			return nil, 0, err
		}
		phase = "commit"
		err = c.Commit(job.Succeeded, "", nil)
		closeCur(time.Now())
		if err != nil {
			return nil, 0, err
		}
	}
	total := time.Since(start) / time.Duration(n)
	out := make([]Step, 0, len(steps))
	order := map[string]int{}
	for name, a := range steps {
		out = append(out, Step{Name: name, Count: float64(a.count) / float64(n), Mean: a.d / time.Duration(n)})
		order[name] = a.first
	}
	sort.Slice(out, func(i, j int) bool { return order[out[i].Name] < order[out[j].Name] })
	return out, total, nil
}

// stepName describes an operation by the spool directories it touches,
// with job and agent names generalised.
func stepName(root string, op fsq.Op, path, path2 string) string {
	rel := func(p string) string {
		r, err := filepath.Rel(root, p)
		if err != nil {
			return p
		}
		parts := strings.Split(r, string(filepath.Separator))
		switch {
		case len(parts) >= 1 && parts[0] == "in-progress":
			if len(parts) >= 2 {
				parts[1] = "<agent>"
			}
			switch {
			case len(parts) >= 3 && parts[2] == job.PoolDir:
				// The agent's pool: its entries' random names merged.
				if len(parts) >= 5 {
					parts[4] = "<spare>"
				}
			case len(parts) >= 3:
				parts[2] = "<id>"
			}
		case len(parts) >= 1 && parts[0] == "completed":
			if len(parts) >= 3 {
				parts[2] = "<id>"
			}
		case len(parts) >= 2:
			if strings.HasSuffix(parts[1], ".lock") {
				parts[1] = "<id>.lock"
			} else {
				parts[1] = "<id>"
			}
		}
		if t, ok := fsq.TempTarget(parts[len(parts)-1]); ok {
			parts[len(parts)-1] = "." + t + "<tmp>" // a staged file's random name
		}
		return strings.Join(parts, "/")
	}
	if path2 != "" {
		return string(op) + " " + rel(path) + " -> " + rel(path2)
	}
	return string(op) + " " + rel(path)
}
