package ctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/farro-dev/farro/internal/pause"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// Row is one job as ls shows it (one JSON object per line with --json).
type Row struct {
	ID          string    `json:"id"`
	Status      job.State `json:"status"`   // from job.json; "" when unreadable
	Location    job.State `json:"location"` // the state directory the job is in
	Kind        string    `json:"kind"`
	Priority    int       `json:"priority"`
	Attempts    int       `json:"attempts"`
	MaxAttempts int       `json:"max_attempts"` // the limit that applies
	// MaxAttemptsFrom says where MaxAttempts comes from: "job" (its
	// own), "managerd --max-attempts" or "default" (see limits.go).
	MaxAttemptsFrom string     `json:"max_attempts_from,omitempty"`
	Agent           string     `json:"agent"`
	CreatedAt       *time.Time `json:"created_at"`
	UpdatedAt       *time.Time `json:"updated_at"`
	NotBefore       *time.Time `json:"not_before,omitempty"`
	Reason          string     `json:"reason"`
	Error           string     `json:"error,omitempty"` // the last attempt's error
	Dir             string     `json:"dir"`
	Problem         string     `json:"problem,omitempty"`     // unreadable, hostile, status/directory mismatch
	KindPaused      bool       `json:"kind_paused,omitempty"` // queued, of a kind paused queue-wide (farroctl pause)
}

// ListOptions are ls's flags.
type ListOptions struct {
	States []string // state names or directories; none: all
	JSON   bool
}

// Rows reads every job of the given states (all when empty).
func Rows(s *job.Spool, states []job.State) ([]Row, error) {
	es, err := walk(s, states)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(es))
	lim := newLimits(s)
	paused := pausedKinds(s.Root)
	for _, e := range es {
		r := row(e, lim)
		r.KindPaused = r.Location == job.Queued && r.Status == job.Queued && paused[r.Kind]
		rows = append(rows, r)
	}
	sortQueued(rows)
	return rows, nil
}

// sortQueued puts the queued rows in claim order: highest priority
// first, oldest first. The rows of each state are together.
func sortQueued(rows []Row) {
	lo, hi := -1, -1
	for i, r := range rows {
		if r.Location == job.Queued {
			if lo < 0 {
				lo = i
			}
			hi = i + 1
		}
	}
	if lo >= 0 {
		q := rows[lo:hi]
		sort.SliceStable(q, func(a, b int) bool {
			ra, rb := q[a], q[b]
			if ra.Priority != rb.Priority {
				return ra.Priority > rb.Priority
			}
			if ra.CreatedAt != nil && rb.CreatedAt != nil && !ra.CreatedAt.Equal(*rb.CreatedAt) {
				return ra.CreatedAt.Before(*rb.CreatedAt)
			}
			return ra.ID < rb.ID
		})
	}
}

func row(e entry, lim limits) Row {
	r := Row{ID: e.Name, Location: e.State, Agent: e.Agent, Dir: e.Path}
	if e.Hostile {
		r.Problem = "not a job directory (symlink or file); run farroctl fsck"
		return r
	}
	j, err := job.ReadJob(e.Path)
	if j != nil {
		r.fill(j, lim)
	}
	switch {
	case err != nil:
		r.Problem = oneLine(err.Error())
	case j.Status != e.State:
		r.Problem = fmt.Sprintf("status %s disagrees with its directory %s/; run farroctl fsck", j.Status, e.State.Dir())
	}
	return r
}

// fill sets r's fields from job.json's.
func (r *Row) fill(j *job.Job, lim limits) {
	r.Status, r.Kind, r.Priority = j.Status, j.Kind, j.Priority
	r.Attempts, r.Reason, r.Error = j.Attempts, j.Reason, j.Error
	r.MaxAttempts, r.MaxAttemptsFrom = lim.of(j)
	created, updated := j.CreatedAt, j.UpdatedAt
	r.CreatedAt, r.UpdatedAt, r.NotBefore = &created, &updated, j.NotBefore
	if j.Agent != "" {
		r.Agent = j.Agent
	}
}

// List prints the jobs: a table, or JSON Lines with JSON.
func (c *Ctl) List(o ListOptions) error {
	var states []job.State
	for _, name := range o.States {
		for _, part := range strings.Split(name, ",") {
			st, ok := ParseState(part)
			if !ok {
				return Usagef("unknown state %q (one of %s)", part, stateNames())
			}
			states = append(states, st)
		}
	}
	if len(states) > 0 {
		// Keep the lifecycle order and drop repeats.
		var ordered []job.State
		for _, st := range job.States {
			for _, want := range states {
				if st == want {
					ordered = append(ordered, st)
					break
				}
			}
		}
		states = ordered
	}
	rows, err := readFrom(c, func() ([]Row, error) { return c.storeRows(states) }, func(s *job.Spool) ([]Row, error) { return Rows(s, states) })
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(c.Stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPRI\tATT\tMAX\tKIND\tAGENT\tUPDATED\tREASON")
	now := c.now()
	for _, r := range rows {
		status, reason, updated := string(r.Status), r.Reason, "-"
		if r.Error != "" && r.Reason == "" {
			reason = r.Error
		}
		if r.NotBefore != nil && r.Status == job.Deferred {
			reason = fmt.Sprintf("runs %s (in %s); %s", r.NotBefore.UTC().Format(time.RFC3339), untilText(now, *r.NotBefore), reason)
		}
		if r.Problem != "" {
			status, reason = "!"+string(r.Location), r.Problem
		}
		if r.KindPaused {
			reason = "[kind paused] " + reason
		}
		if r.UpdatedAt != nil {
			updated = r.UpdatedAt.UTC().Format(time.RFC3339)
		}
		max := "-"
		if r.MaxAttempts > 0 {
			max = fmt.Sprint(r.MaxAttempts)
			if r.MaxAttemptsFrom != LimitFromJob {
				max += "*" // not the job's own: the legend below says whose
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, status, r.Priority, r.Attempts, max,
			dash(r.Kind), dash(r.Agent), updated, truncate(oneLine(reason), 96))
	}
	return tw.Flush()
}

// untilText is how long until t, to the second ("now" once it passed).
func untilText(now, t time.Time) string {
	if !t.After(now) {
		return "now"
	}
	return t.Sub(now).Round(time.Second).String()
}

// LockInfo describes a job's claim lock (incoming/<id>.lock).
type LockInfo struct {
	Path    string     `json:"path"`
	Owner   *job.Owner `json:"owner,omitempty"`
	Verdict string     `json:"verdict,omitempty"` // of the owner: alive, pid gone, pid reused, ...
	AgeSecs float64    `json:"age_seconds"`
	Problem string     `json:"problem,omitempty"` // no owner file, unreadable owner, not a directory
	raw     []byte
	mtime   time.Time
	// denied: the owner file exists but this user may not read it. Its
	// holder may be another user's live process: never judged dead.
	denied bool
}

// readLock returns the lock of id, or nil when it is not locked.
func readLock(s *job.Spool, id string, now time.Time) (*LockInfo, error) {
	path := s.LockPath(id)
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	li := &LockInfo{Path: path, mtime: fi.ModTime(), AgeSecs: seconds(now.Sub(fi.ModTime()))}
	if !fi.IsDir() {
		li.Problem = "not a directory"
		return li, nil
	}
	raw, err := fsq.ReadOwner(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, derr := os.Lstat(path); errors.Is(derr, fs.ErrNotExist) {
				return nil, nil // released meanwhile
			}
			li.Problem = "no owner file"
		} else {
			li.Problem = "owner file unreadable: " + err.Error()
			li.denied = errors.Is(err, fs.ErrPermission)
		}
		return li, nil
	}
	li.raw = raw
	o, err := job.ParseOwner(raw)
	if err != nil {
		li.Problem = err.Error()
		return li, nil
	}
	li.Owner, li.Verdict = &o, proc.Check(o.Identity).String()
	return li, nil
}

// dead reports whether the lock belongs to nobody alive: its owner is
// proved dead, or it has had no (readable) owner file for longer than
// grace. A lock that is not a directory is not a lock, and one whose
// owner file this user may not read proves nothing: never dead.
func (li *LockInfo) dead(grace time.Duration, now time.Time) (bool, string) {
	switch {
	case li.Problem == "not a directory", li.denied:
		return false, ""
	case li.Owner != nil:
		v := proc.Check(li.Owner.Identity)
		if v.Dead() {
			return true, fmt.Sprintf("owner %s pid %d: %s", li.Owner.Actor, li.Owner.PID, v)
		}
		return false, ""
	case now.Sub(li.mtime) >= grace:
		return true, fmt.Sprintf("%s for %s", li.Problem, now.Sub(li.mtime).Round(time.Second))
	}
	return false, ""
}

// ShowDoc is show's output: job.json's fields plus where the job is.
type ShowDoc struct {
	ID string `json:"id"`
	*job.Job
	// MaxAttemptsApplied is the limit that applies to the job (its own,
	// else managerd's --max-attempts), and MaxAttemptsFrom whose it is.
	MaxAttemptsApplied int             `json:"max_attempts_applied,omitempty"`
	MaxAttemptsFrom    string          `json:"max_attempts_from,omitempty"`
	Location           job.State       `json:"location"`
	Dir                string          `json:"dir"`
	Lock               *LockInfo       `json:"lock"`
	Control            *job.Control    `json:"control,omitempty"`
	Prompt             json.RawMessage `json:"prompt,omitempty"`
	Locations          []job.Location  `json:"locations,omitempty"` // only when found in several places
	Problem            string          `json:"problem,omitempty"`
}

// Show prints job id as one JSON document. A job that is not found, found
// in several places or unreadable is an error (exit 1); in the last two
// cases the document is printed first.
func (c *Ctl) Show(args []string) error {
	if len(args) != 1 {
		return Usagef("show takes exactly one job ID, got %d", len(args))
	}
	id := args[0]
	if err := job.ValidateID(id); err != nil {
		return UsageError(err)
	}
	var doc ShowDoc
	var locs []job.Location
	if c.OnStore() {
		var err error
		if doc, err = c.storeShow(id); err != nil {
			return err
		}
		id = doc.ID
	} else {
		s, err := c.existing()
		if err != nil {
			return err
		}
		if id, err = c.resolveOne(s, id); err != nil {
			return err
		}
		if doc, locs, err = c.showSettled(s, id); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "%s\n", b)
	if len(locs) > 1 || doc.Job == nil {
		return fmt.Errorf("%s: %s", id, doc.Problem)
	}
	return nil
}

// showSettled reads job id into a ShowDoc. A job that moves while it is
// read (its directory vanishes, or its status and directory disagree for
// the moment of a claim or a commit) is read again; what stays is
// reported in Problem.
func (c *Ctl) showSettled(s *job.Spool, id string) (ShowDoc, []job.Location, error) {
	var doc ShowDoc
	var locs []job.Location
	var problems []string
	var err error
	for try := 0; ; try++ {
		if locs, err = s.LocateSettled(id, Actor); err != nil {
			return ShowDoc{}, nil, err
		}
		var moving bool
		doc, problems, moving = c.showDoc(s, id, locs)
		if !moving || try >= showRetries {
			break
		}
		time.Sleep(time.Duration(try+1) * time.Millisecond)
	}
	doc.Problem = strings.Join(problems, "; ")
	return doc, locs, nil
}

// showRetries bounds Show's readings of a job that keeps moving.
const showRetries = 30

// showDoc reads the job at locs[0] (and its lock) into a ShowDoc, with
// the problems found; moving reports a job that moved while it was read.
func (c *Ctl) showDoc(s *job.Spool, id string, locs []job.Location) (doc ShowDoc, problems []string, moving bool) {
	dir := locs[0].Dir
	doc = ShowDoc{ID: id, Location: locs[0].State, Dir: dir}
	if len(locs) > 1 {
		doc.Locations = locs
		problems = append(problems, fmt.Sprintf("found in %d places; run farroctl fsck", len(locs)))
	}
	j, err := job.ReadJob(dir)
	doc.Job = j
	if j != nil {
		doc.MaxAttemptsApplied, doc.MaxAttemptsFrom = newLimits(s).of(j)
	}
	if err != nil {
		moving = errors.Is(err, fsq.ErrVanished)
		problems = append(problems, oneLine(err.Error()))
	} else if j.Status != locs[0].State {
		moving = true
		problems = append(problems, fmt.Sprintf("status %s disagrees with its directory %s/", j.Status, locs[0].State.Dir()))
	}
	if doc.Lock, err = readLock(s, id, c.now()); err != nil {
		problems = append(problems, "lock: "+err.Error())
	}
	if ctl, err := job.ReadControl(dir); err != nil {
		problems = append(problems, err.Error())
	} else {
		doc.Control = ctl
	}
	if p, err := job.ReadPrompt(dir); err != nil {
		problems = append(problems, err.Error())
	} else if !json.Valid(p) {
		problems = append(problems, "prompt.json is not valid JSON")
	} else {
		doc.Prompt = p
	}
	if _, err := os.Lstat(dir); err != nil {
		moving = true // gone meanwhile: what was read may be torn
	}
	return doc, problems, moving
}

// Stats is stats' output.
type Stats struct {
	States  map[job.State]int `json:"states"` // every state, zeros included
	Total   int               `json:"total"`
	Agents  map[string]int    `json:"agents"`  // in-progress jobs per agent
	Locks   int               `json:"locks"`   // claim locks in incoming/
	Hostile int               `json:"hostile"` // symlinks and files where jobs must be
	Corrupt int               `json:"corrupt"` // quarantined entries in corrupt/
	Tmp     int               `json:"tmp"`     // entries in tmp/ (submits in flight or leftovers)
	// OldestQueuedAge is the age in seconds (from created_at) of the
	// oldest job in incoming/; null when there is none.
	OldestQueuedAge *float64 `json:"oldest_queued_age_seconds"`
	OldestQueuedID  string   `json:"oldest_queued_id,omitempty"`
	// PausedKinds are the kinds paused queue-wide (farroctl pause): no
	// agent claims their queued jobs.
	PausedKinds []string  `json:"paused_kinds"`
	At          time.Time `json:"at"`
}

// Count computes the spool's statistics. Only incoming/ jobs are read (for
// their created_at); the rest is counted from directory entries.
func Count(s *job.Spool, now time.Time) (*Stats, error) {
	st := &Stats{States: map[job.State]int{}, Agents: map[string]int{}, PausedKinds: []string{}, At: now}
	if kinds, _, err := pause.Kinds(s.Root); err == nil && kinds != nil {
		st.PausedKinds = kinds
	}
	for _, state := range job.States {
		st.States[state] = 0
	}
	es, err := walk(s, nil)
	if err != nil {
		return nil, err
	}
	var oldest *time.Time
	for _, e := range es {
		if e.Hostile {
			st.Hostile++
			continue
		}
		st.States[e.State]++
		st.Total++
		if e.State == job.InProgress {
			st.Agents[e.Agent]++
		}
		if e.State == job.Queued {
			j, err := job.ReadJob(e.Path)
			if err != nil || j == nil {
				continue
			}
			if oldest == nil || j.CreatedAt.Before(*oldest) {
				t := j.CreatedAt
				oldest, st.OldestQueuedID = &t, j.ID
			}
		}
	}
	if oldest != nil {
		age := math.Max(0, seconds(now.Sub(*oldest)))
		st.OldestQueuedAge = &age
	}
	ls, err := locks(s)
	if err != nil {
		return nil, err
	}
	st.Locks = len(ls)
	if st.Corrupt, err = countEntries(s.Path(job.CorruptDir), func(name string) bool {
		return !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, ".quarantine.json")
	}); err != nil {
		return nil, err
	}
	if st.Tmp, err = countEntries(s.Path(job.TmpDir), func(string) bool { return true }); err != nil {
		return nil, err
	}
	return st, nil
}

// Stats prints the spool's statistics.
func (c *Ctl) Stats(jsonOut bool) error {
	st, err := readFrom(c, c.storeCount, func(s *job.Spool) (*Stats, error) { return Count(s, c.now()) })
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(c.Stdout).Encode(st)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	for _, state := range job.States {
		fmt.Fprintf(tw, "%s\t%d\n", state, st.States[state])
	}
	fmt.Fprintf(tw, "total\t%d\n", st.Total)
	agents := make([]string, 0, len(st.Agents))
	for a := range st.Agents {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	for _, a := range agents {
		fmt.Fprintf(tw, "  agent %s\t%d\n", a, st.Agents[a])
	}
	fmt.Fprintf(tw, "locks\t%d\n", st.Locks)
	fmt.Fprintf(tw, "corrupt\t%d\n", st.Corrupt)
	fmt.Fprintf(tw, "tmp\t%d\n", st.Tmp)
	if st.Hostile > 0 {
		fmt.Fprintf(tw, "hostile\t%d\t(run farroctl fsck)\n", st.Hostile)
	}
	if st.OldestQueuedAge != nil {
		fmt.Fprintf(tw, "oldest queued\t%s\t(%s)\n", (time.Duration(*st.OldestQueuedAge * float64(time.Second))).Round(time.Millisecond), st.OldestQueuedID)
	} else {
		fmt.Fprintf(tw, "oldest queued\t-\n")
	}
	if len(st.PausedKinds) > 0 {
		fmt.Fprintf(tw, "paused kinds\t%s\t(not claimed; farroctl resume KIND)\n", strings.Join(st.PausedKinds, ","))
	}
	return tw.Flush()
}

func countEntries(dir string, keep func(string) bool) (int, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	n := 0
	for _, de := range des {
		if keep(de.Name()) {
			n++
		}
	}
	return n, nil
}

func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// relPath shows path relative to the spool root when it is inside it.
func relPath(s *job.Spool, path string) string {
	if rel, err := filepath.Rel(s.Root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}
