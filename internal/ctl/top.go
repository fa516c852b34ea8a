package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/pkg/job"
)

// TopOptions are top's flags.
type TopOptions struct {
	Interval time.Duration // refresh period of the live view (default 2s)
	Once     bool          // print one plain snapshot even on a terminal
	JSON     bool          // print one snapshot as JSON
}

// TopJob is a running job as top shows it.
type TopJob struct {
	ID            string     `json:"id"`
	Kind          string     `json:"kind"`
	Attempt       int        `json:"attempt"`
	MaxAttempts   int        `json:"max_attempts"`
	StartedAt     *time.Time `json:"started_at"`
	LastHeartbeat *time.Time `json:"last_heartbeat"`
	Problem       string     `json:"problem,omitempty"`
}

// TopWorker is one agent and what it holds: every live agent of the
// registry, and every agent directory of in-progress/ that holds jobs.
type TopWorker struct {
	Agent string `json:"agent"`
	// State is the agent's registry state: "live" (its flock is held),
	// "gone" (its process is not running: what it holds waits for
	// watchdogd) or "unregistered" (no record: an agent of an older
	// farro, or a directory made by hand).
	State string   `json:"state"`
	Slots int      `json:"slots,omitempty"`
	Jobs  []TopJob `json:"jobs"`
}

// TopDaemon is managerd or watchdogd as top shows it.
type TopDaemon struct {
	Name  string `json:"name"`
	State string `json:"state"` // live, gone, or missing (never ran here)
}

// TopDoc is one snapshot of top (top --json prints it).
type TopDoc struct {
	Spool   string            `json:"spool"`
	At      time.Time         `json:"at"`
	States  map[job.State]int `json:"states"`
	Total   int               `json:"total"`
	Locks   int               `json:"locks"`
	Corrupt int               `json:"corrupt"`
	// OldestQueuedAge is the age (from created_at) of the oldest queued
	// job in seconds; null when nothing is queued.
	OldestQueuedAge *float64 `json:"oldest_queued_age_seconds"`
	// Throughput is the rate of jobs reaching completed/ (succeeded,
	// failed, killed) per second over the last minute; null until the live
	// view has watched for a while (never in a one-shot snapshot).
	Throughput        *float64              `json:"throughput_per_second"`
	ThroughputByState map[job.State]float64 `json:"throughput_by_state,omitempty"`
	Workers           []TopWorker           `json:"workers"`
	// GoneIdle counts agents of the registry that are gone and hold
	// nothing (listed by farroctl agents, not here).
	GoneIdle int         `json:"gone_idle_agents"`
	Daemons  []TopDaemon `json:"daemons"`
}

// Top shows the queue: counts per state, the oldest queued job,
// throughput, and every worker with the jobs it runs (heartbeat age
// included). On a terminal it is a live view refreshed in place every
// Interval until q, Q or Ctrl-C; otherwise (a pipe, a file), or with Once
// or JSON, it prints one snapshot and returns.
func (c *Ctl) Top(o TopOptions) error {
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.Interval < 100*time.Millisecond {
		return Usagef("--interval must be at least 100ms")
	}
	if c.OnStore() {
		return c.topStore(o)
	}
	s, err := c.existing()
	if err != nil {
		return err
	}
	out, tty := c.Stdout.(*os.File)
	tty = tty && term.IsTerminal(int(out.Fd()))
	if o.JSON || o.Once || !tty {
		v := spoolview.New(s, spoolview.Config{})
		if err := v.Scan(); err != nil {
			return err
		}
		doc := topDoc(s, v.Snapshot(), nil)
		if o.JSON {
			return json.NewEncoder(c.Stdout).Encode(doc)
		}
		_, err := io.WriteString(c.Stdout, strings.Join(renderTop(doc, "", 0), "\n")+"\n")
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := spoolview.New(s, spoolview.Config{Running: o.Interval / 2})
	viewDone := make(chan error, 1)
	go func() { viewDone <- v.Run(ctx) }()
	defer func() { cancel(); <-viewDone }()
	rate := &rateWindow{span: time.Minute}
	return c.topLive(out, o, v.Ready(), func(header string, w int) []string {
		if snap := v.Snapshot(); snap.Ready {
			rate.add(snap)
			return renderTop(topDoc(s, snap, rate), header, w)
		}
		return []string{"farro top · " + s.Root, "", "listing the spool..."}
	})
}

// topLive runs the refreshing view on the terminal out: lines gives the
// screen's lines at each draw; ready, when it fires, draws at once.
func (c *Ctl) topLive(out *os.File, o TopOptions, ready <-chan struct{}, lines func(header string, width int) []string) error {

	// Keys: q, Q, Ctrl-C (raw mode turns it into a byte) end the view.
	keys := make(chan byte, 8)
	if in, ok := c.Stdin.(*os.File); ok && term.IsTerminal(int(in.Fd())) {
		if st, err := term.MakeRaw(int(in.Fd())); err == nil {
			defer term.Restore(int(in.Fd()), st)
		}
		go func() {
			buf := make([]byte, 16)
			for {
				n, err := in.Read(buf)
				for _, b := range buf[:n] {
					keys <- b
				}
				if err != nil {
					close(keys)
					return
				}
			}
		}()
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGWINCH)
	defer signal.Stop(sigs)

	io.WriteString(out, "\x1b[?1049h\x1b[?25l") // alternate screen, cursor hidden
	defer io.WriteString(out, "\x1b[?25h\x1b[?1049l")

	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	draw := func() {
		w, h, err := term.GetSize(int(out.Fd()))
		if err != nil || w <= 0 {
			w, h = 80, 24
		}
		lines := lines(fmt.Sprintf("every %s · q quits", o.Interval), w)
		if h > 0 && len(lines) > h {
			lines = append(lines[:h-1], fmt.Sprintf("... %d more lines (enlarge the terminal)", len(lines)-h+1))
		}
		var b strings.Builder
		b.WriteString("\x1b[H")
		for i, l := range lines {
			if i > 0 {
				b.WriteString("\r\n")
			}
			b.WriteString(fit(l, w))
			b.WriteString("\x1b[K")
		}
		b.WriteString("\x1b[J")
		io.WriteString(out, b.String())
	}
	draw()
	for {
		select {
		case <-ready:
			ready = nil
			draw()
		case <-tick.C:
			draw()
		case sig := <-sigs:
			if sig != syscall.SIGWINCH {
				return nil
			}
			draw()
		case k, ok := <-keys:
			if !ok {
				keys = nil
				continue
			}
			switch k {
			case 'q', 'Q', 3, 4: // q, Ctrl-C, Ctrl-D
				return nil
			default:
				draw()
			}
		}
	}
}

// rateWindow keeps recent samples of the arrivals in completed/ to compute
// a throughput.
type rateWindow struct {
	span    time.Duration
	samples []rateSample
}

type rateSample struct {
	at      time.Time
	arrived map[job.State]uint64
}

var finishedStates = []job.State{job.Succeeded, job.Failed, job.Killed}

func (r *rateWindow) add(s spoolview.Snapshot) {
	r.samples = append(r.samples, rateSample{at: s.At, arrived: s.Arrived})
	// Keep the newest sample older than the span, as the window's start.
	cut := 0
	for i, x := range r.samples {
		if s.At.Sub(x.at) >= r.span {
			cut = i
		}
	}
	r.samples = r.samples[cut:]
}

// rates returns jobs/s per finished state over the window; ok is false
// before a second of observation.
func (r *rateWindow) rates() (map[job.State]float64, bool) {
	if len(r.samples) < 2 {
		return nil, false
	}
	first, last := r.samples[0], r.samples[len(r.samples)-1]
	secs := last.at.Sub(first.at).Seconds()
	if secs < 1 {
		return nil, false
	}
	out := map[job.State]float64{}
	for _, st := range finishedStates {
		out[st] = float64(last.arrived[st]-first.arrived[st]) / secs
	}
	return out, true
}

func topDoc(s *job.Spool, snap spoolview.Snapshot, rate *rateWindow) TopDoc {
	// The registry says who is alive; in-progress/ says who holds what.
	reg, _ := registry.List(s) // unreadable: every agent shows as unregistered
	return buildTop(s.Root, snap, rate, reg, func(agent, id string) (*job.Job, error) {
		return job.ReadJob(s.JobDir(job.InProgress, agent, id))
	})
}

// buildTop is top's document from a snapshot of the jobs, the registry
// of who runs them and read, which gives a running job's lifecycle:
// where (a spool's root, a database's name) the jobs are.
func buildTop(where string, snap spoolview.Snapshot, rate *rateWindow, reg registry.Listing, read func(agent, id string) (*job.Job, error)) TopDoc {
	d := TopDoc{
		Spool: where, At: snap.At, States: snap.States, Total: snap.Total(),
		Locks: snap.Locks, Corrupt: snap.Corrupt, Workers: []TopWorker{},
	}
	if !snap.OldestQueued.IsZero() {
		age := seconds(snap.At.Sub(snap.OldestQueued))
		d.OldestQueuedAge = &age
	}
	if rate != nil {
		if by, ok := rate.rates(); ok {
			total := 0.0
			for _, r := range by {
				total += r
			}
			d.Throughput, d.ThroughputByState = &total, by
		}
	}
	known := map[string]registry.Entry{}
	for _, e := range reg.Agents {
		known[e.ID] = e
	}
	byAgent := map[string]*TopWorker{}
	worker := func(a string) *TopWorker {
		if w := byAgent[a]; w != nil {
			return w
		}
		w := &TopWorker{Agent: a, State: "unregistered", Jobs: []TopJob{}}
		if e, ok := known[a]; ok {
			w.State, w.Slots = "gone", e.Slots
			if e.Live {
				w.State = "live"
			}
		}
		byAgent[a] = w
		return w
	}
	for _, e := range reg.Agents {
		if e.Live {
			worker(e.ID)
		}
	}
	for _, r := range snap.Running {
		w := worker(r.Agent)
		tj := TopJob{ID: r.ID}
		if j, err := read(r.Agent, r.ID); err == nil {
			tj.Kind, tj.Attempt, tj.MaxAttempts = j.Kind, j.Attempts, j.MaxAttempts
			tj.StartedAt, tj.LastHeartbeat = j.StartedAt, j.LastHeartbeat
		} else {
			tj.Problem = oneLine(err.Error())
		}
		w.Jobs = append(w.Jobs, tj)
	}
	for _, e := range reg.Agents {
		if _, shown := byAgent[e.ID]; !shown && !e.Live {
			d.GoneIdle++
		}
	}
	for _, name := range []string{"managerd", "watchdogd"} {
		td := TopDaemon{Name: name, State: "missing"}
		for _, e := range reg.Daemons {
			if e.ID == name {
				td.State = "gone"
				if e.Live {
					td.State = "live"
				}
			}
		}
		d.Daemons = append(d.Daemons, td)
	}
	for _, w := range byAgent {
		sort.Slice(w.Jobs, func(i, j int) bool { return w.Jobs[i].ID < w.Jobs[j].ID })
		d.Workers = append(d.Workers, *w)
	}
	sort.Slice(d.Workers, func(i, j int) bool { return d.Workers[i].Agent < d.Workers[j].Agent })
	return d
}

// renderTop lays a snapshot out as lines of text. header is appended to
// the first line (the live view's refresh period); width 0 means no
// limit (lines are cut by the caller).
func renderTop(d TopDoc, header string, width int) []string {
	var b strings.Builder
	title := fmt.Sprintf("farro top · %s · %s", d.Spool, d.At.UTC().Format("2006-01-02 15:04:05 UTC"))
	if header != "" {
		title += " · " + header
	}
	b.WriteString(title + "\n\n")
	oldest := "oldest queued: -"
	if d.OldestQueuedAge != nil {
		oldest = "oldest queued: " + fmtAge(time.Duration(*d.OldestQueuedAge*float64(time.Second))) + " ago"
	}
	fmt.Fprintf(&b, "%-12s %10s\n", "STATE", "JOBS")
	for _, st := range job.States {
		extra := ""
		if st == job.Queued {
			extra = "   " + oldest
		}
		fmt.Fprintf(&b, "%-12s %10d%s\n", st, d.States[st], extra)
	}
	fmt.Fprintf(&b, "%-12s %10d   locks %d · corrupt %d\n", "total", d.Total, d.Locks, d.Corrupt)
	if d.Throughput != nil {
		fmt.Fprintf(&b, "throughput (last 1m): %.1f jobs/s finished (succeeded %.1f, failed %.1f, killed %.1f)\n",
			*d.Throughput, d.ThroughputByState[job.Succeeded], d.ThroughputByState[job.Failed], d.ThroughputByState[job.Killed])
	} else {
		b.WriteString("throughput: - (the live view measures it)\n")
	}
	b.WriteString("\n")
	running := 0
	for _, w := range d.Workers {
		running += len(w.Jobs)
	}
	live := 0
	for _, w := range d.Workers {
		if w.State == "live" {
			live++
		}
	}
	var ds []string
	for _, dm := range d.Daemons {
		ds = append(ds, dm.Name+" "+dm.State)
	}
	fmt.Fprintf(&b, "DAEMONS: %s\n", strings.Join(ds, " · "))
	fmt.Fprintf(&b, "WORKERS: %d live agent(s), %d job(s) running", live, running)
	if d.GoneIdle > 0 {
		fmt.Fprintf(&b, ", %d gone and idle", d.GoneIdle)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tJOB\tKIND\tATTEMPT\tRUNNING\tHEARTBEAT")
	for _, w := range d.Workers {
		name := w.Agent
		if w.State != "live" {
			name += " (" + w.State + ")"
		}
		if len(w.Jobs) == 0 {
			fmt.Fprintf(tw, "%s\t(idle)\t\t\t\t\n", name)
		}
		for _, j := range w.Jobs {
			if j.Problem != "" {
				fmt.Fprintf(tw, "%s\t%s\t!\t\t\t%s\n", name, j.ID, truncate(j.Problem, 50))
				continue
			}
			att := fmt.Sprint(j.Attempt)
			if j.MaxAttempts > 0 {
				att += fmt.Sprintf("/%d", j.MaxAttempts)
			}
			run, hb := "-", "-"
			if j.StartedAt != nil {
				run = fmtAge(d.At.Sub(*j.StartedAt))
			}
			if j.LastHeartbeat != nil {
				hb = fmtAge(d.At.Sub(*j.LastHeartbeat)) + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, j.ID, dash(j.Kind), att, run, hb)
		}
	}
	tw.Flush()
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
		if width > 0 {
			lines[i] = fit(lines[i], width)
		}
	}
	return lines
}

// fit cuts s to at most width runes.
func fit(s string, width int) string {
	if width <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width])
}
