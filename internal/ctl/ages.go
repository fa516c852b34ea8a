package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// AgeEdges are the upper bounds of stats --ages' buckets, qshape's
// doubling edges; a last bucket (le_seconds null) holds the older jobs.
var AgeEdges = []time.Duration{
	time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute,
	80 * time.Minute, 160 * time.Minute, 320 * time.Minute, 640 * time.Minute,
}

// AgeBucket counts the jobs of a state whose age is at most LE seconds
// (and more than the previous bucket's); LE is nil for the last bucket,
// the jobs older than the last edge.
type AgeBucket struct {
	LE    *float64 `json:"le_seconds"`
	Count int      `json:"count"`
}

// StateAges is one state's row of stats --ages. Total counts every entry
// of the state directory; Unreadable those whose job.json could not be
// read (or that are not job directories), which are in no bucket.
type StateAges struct {
	Total      int         `json:"total"`
	Unreadable int         `json:"unreadable"`
	Buckets    []AgeBucket `json:"buckets"`
}

// AgeSince is the time a job's age in its state is measured from: when it
// entered its current state. That is updated_at, except in in-progress/,
// where heartbeats refresh updated_at: there it is started_at (the claim).
func AgeSince(j *job.Job) time.Time {
	if j.Status == job.InProgress && j.StartedAt != nil {
		return *j.StartedAt
	}
	return j.UpdatedAt
}

// Ages buckets the jobs of every state by the time since they entered it
// (AgeSince), as of now. A job in the future (clock skew) is in the first
// bucket. It reads each job's job.json; one that cannot be read is
// counted as unreadable.
func Ages(s *job.Spool, now time.Time) (map[job.State]*StateAges, error) {
	sh, err := shapeOf(s, now)
	if err != nil {
		return nil, err
	}
	return sh.Ages, nil
}

// shapeOf is Ages' pass, which also counts the jobs of each kind per
// state (farroctl serve's overview).
func shapeOf(s *job.Spool, now time.Time) (*Shape, error) {
	sh := newShape(now)
	es, err := walk(s, nil)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		sa := sh.Ages[e.State]
		sa.Total++
		if e.Hostile {
			sa.Unreadable++
			sh.Kinds[e.State][""]++
			continue
		}
		j, err := job.ReadJob(e.Path)
		if err != nil || j == nil {
			sa.Unreadable++
			sh.Kinds[e.State][""]++
			continue
		}
		sh.count(e.State, j)
	}
	return sh, nil
}

func newShape(now time.Time) *Shape {
	sh := &Shape{Ages: make(map[job.State]*StateAges, len(job.States)), Kinds: map[job.State]map[string]int{}, At: now}
	for _, st := range job.States {
		sh.Ages[st] = newStateAges()
		sh.Kinds[st] = map[string]int{}
	}
	return sh
}

// count adds job j, of state st, to its age bucket and its kind (its
// state's total is the caller's: a spool counts unreadable entries too).
func (sh *Shape) count(st job.State, j *job.Job) {
	sh.Ages[st].Buckets[bucketOf(sh.At.Sub(AgeSince(j)))].Count++
	sh.Kinds[st][j.Kind]++
}

func newStateAges() *StateAges {
	sa := &StateAges{Buckets: make([]AgeBucket, len(AgeEdges)+1)}
	for i, edge := range AgeEdges {
		le := edge.Seconds()
		sa.Buckets[i].LE = &le
	}
	return sa
}

// bucketOf returns the index of the bucket of age: the first edge it does
// not exceed, or the last bucket.
func bucketOf(age time.Duration) int {
	for i, edge := range AgeEdges {
		if age <= edge {
			return i
		}
	}
	return len(AgeEdges)
}

// StatsAges prints stats --ages: a table with a row per state, or one
// JSON object {state: StateAges}.
func (c *Ctl) StatsAges(jsonOut bool) error {
	ages, err := readFrom(c, c.storeAges, func(s *job.Spool) (map[job.State]*StateAges, error) { return Ages(s, c.now()) })
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(c.Stdout).Encode(ages)
	}
	head := []string{"STATE", "T"}
	for _, edge := range AgeEdges {
		head = append(head, edgeLabel(edge))
	}
	head = append(head, edgeLabel(AgeEdges[len(AgeEdges)-1])+"+", "UNREADABLE")
	table := [][]string{head}
	sum := newStateAges()
	for _, st := range job.States {
		sa := ages[st]
		table = append(table, ageRow(string(st), sa))
		sum.Total += sa.Total
		sum.Unreadable += sa.Unreadable
		for i := range sa.Buckets {
			sum.Buckets[i].Count += sa.Buckets[i].Count
		}
	}
	table = append(table, ageRow("TOTAL", sum))
	return writeAligned(c.Stdout, table)
}

func ageRow(name string, sa *StateAges) []string {
	row := []string{name, strconv.Itoa(sa.Total)}
	for _, b := range sa.Buckets {
		row = append(row, strconv.Itoa(b.Count))
	}
	return append(row, strconv.Itoa(sa.Unreadable))
}

// writeAligned prints a table with its first column aligned left and the
// others (numbers) right, one space apart.
func writeAligned(w io.Writer, table [][]string) error {
	var widths []int
	for _, row := range table {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(cell))
		}
	}
	var b strings.Builder
	for _, row := range table {
		for i, cell := range row {
			switch i {
			case 0:
				fmt.Fprintf(&b, "%-*s", widths[i], cell)
			default:
				fmt.Fprintf(&b, " %*s", widths[i], cell)
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// edgeLabel writes an edge in minutes, like qshape: 1m, 5m, ..., 640m.
func edgeLabel(d time.Duration) string {
	return strconv.Itoa(int(d/time.Minute)) + "m"
}
