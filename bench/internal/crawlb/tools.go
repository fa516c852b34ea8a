package crawlb

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/farro-dev/farro/bench/internal/farrob"
	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/internal/realsite"
)

// Run is one crawl of the site by one tool.
type Run struct {
	Tool    string
	Elapsed time.Duration
	Log     LogStats
	PeakKiB int64 // peak RSS (farro: the largest daemon's)
	SumKiB  int64 // farro: the daemons' peaks added up
	Farro   *FarroRun
}

// Rate is distinct pages fetched per second.
func (r Run) Rate() float64 { return float64(r.Log.Pages) / r.Elapsed.Seconds() }

func maxRSS(p *sys.Proc) int64 {
	if p.Cmd.ProcessState == nil {
		return 0
	}
	if ru, ok := p.Cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss // KiB on Linux
	}
	return 0
}

// runChild runs cmd to its end and returns its wall time and peak RSS.
func runChild(name string, cmd *exec.Cmd, logPath string, timeout time.Duration, okCodes ...int) (time.Duration, int64, error) {
	start := time.Now()
	p, err := sys.Start(name, cmd, logPath)
	if err != nil {
		return 0, 0, err
	}
	select {
	case <-p.Done():
	case <-time.After(timeout):
		p.Kill()
		return 0, 0, fmt.Errorf("%s: not done within %s (log %s)", name, timeout, logPath)
	}
	el := time.Since(start)
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		ok := false
		for _, c := range okCodes {
			ok = ok || c == code
		}
		if !ok {
			return 0, 0, fmt.Errorf("%s exited %d (log %s)", name, code, logPath)
		}
	}
	return el, maxRSS(p), nil
}

// Wget crawls the site with wget --recursive (one connection, robots.txt
// obeyed, infinite depth), saving the pages under dir.
func Wget(n *realsite.Server, dir, logDir string, timeout time.Duration) (Run, error) {
	out := filepath.Join(dir, "wget-out")
	cmd := exec.Command("wget", "--recursive", "--level=inf", "--no-verbose", "--no-host-directories", "--directory-prefix", out, n.URL(SeedPath))
	// wget exits 8 when a request got an error response (robots.txt 404).
	el, rss, err := runChild("wget", cmd, filepath.Join(logDir, fmt.Sprintf("wget-%d.log", time.Now().UnixNano())), timeout, 8)
	_ = os.RemoveAll(out)
	if err != nil {
		return Run{}, err
	}
	return Run{Tool: "wget", Elapsed: el, PeakKiB: rss}, nil
}

// Colly crawls the site from seed with the collycrawl binary.
func Colly(bin, seed string, parallel, idlePerHost int, logDir string, timeout time.Duration) (Run, error) {
	args := []string{"-parallel", strconv.Itoa(parallel)}
	if idlePerHost > 0 {
		args = append(args, "-idle-per-host", strconv.Itoa(idlePerHost))
	}
	cmd := exec.Command(bin, append(args, seed)...)
	el, rss, err := runChild("colly", cmd, filepath.Join(logDir, fmt.Sprintf("colly-%d.log", time.Now().UnixNano())), timeout)
	if err != nil {
		return Run{}, err
	}
	return Run{Tool: "colly", Elapsed: el, PeakKiB: rss}, nil
}

// FarroConfig is one farro crawl.
type FarroConfig struct {
	Bins        farrob.Bins
	Dir         string // the run's directory (spool inside)
	LogDir      string
	Concurrency int // agentd --concurrency
	Seed        string
	Timeout     time.Duration
	Strace      bool // attach strace -c -f to each daemon
	Perf        bool // perf record agentd and managerd (CPU profile)
	MaxPages    int  // crawl start --max-pages (0: the whole site)
	Keep        bool
}

// FarroRun holds farro's own figures of a run.
type FarroRun struct {
	Status       CrawlStatus
	PeakKiB      map[string]int64         // per daemon (VmHWM at the end)
	CPU          map[string]time.Duration // per daemon, during the crawl
	MgrBaseKiB   int64                    // managerd VmRSS before the crawl
	FrontierDisk int64                    // crawls/NAME without bodies/ and gates/ (allocated bytes)
	BodyDisk     int64                    // crawls/NAME/bodies
	JobDisk      int64                    // the URL jobs' directories in the spool
	// SpoolInodes is how many inodes the spool gained during the crawl
	// (every file and directory under it, hard links once), counted
	// once the crawl is done: what a crawl keeps per page.
	SpoolInodes int64
	Strace      map[string]string  // per daemon: strace -c summary
	Perf        map[string]string  // per daemon: perf report, top symbols
	InFlight    float64            // mean of in_flight over the status polls
	States      map[string]float64 // mean of the crawl's jobs per spool state (job_states)
}

// CrawlStatus is what the benchmark reads of farroctl crawl status --json.
type CrawlStatus struct {
	State      string `json:"state"`
	Discovered int64  `json:"discovered"`
	Released   int64  `json:"released"`
	Fetched    int64  `json:"fetched"`
	Failed     int64  `json:"failed"`
	InFlight   int    `json:"in_flight"`
	Pending    int64  `json:"pending"`

	JobStates map[string]int `json:"job_states"`
}

const crawlName = "bench"

func (c FarroConfig) ctl(args ...string) ([]byte, error) {
	cmd := exec.Command(c.Bins.Path("farroctl"), append([]string{"--spool", filepath.Join(c.Dir, "spool")}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return out, fmt.Errorf("farroctl %v: %v: %s", args, err, ee.Stderr)
		}
		return out, fmt.Errorf("farroctl %v: %v", args, err)
	}
	return out, nil
}

// Farro runs one crawl with farro's real daemons: watchdogd, managerd
// (the frontier) and one agentd are started and ready before the clock
// starts; the clock runs from farroctl crawl start until farroctl crawl
// status --json says done (polled every 100 ms).
func Farro(c FarroConfig) (Run, error) {
	spool := filepath.Join(c.Dir, "spool")
	if err := os.MkdirAll(spool, 0o755); err != nil {
		return Run{}, err
	}
	defer func() {
		if !c.Keep {
			_ = sys.RemoveTree(c.Dir)
		}
	}()
	wd, err := c.Bins.Watchdog(spool, c.LogDir)
	if err != nil {
		return Run{}, err
	}
	defer wd.Stop(syscall.SIGTERM, 10*time.Second)
	md, err := c.Bins.Manager(spool, c.LogDir)
	if err != nil {
		return Run{}, err
	}
	defer md.Stop(syscall.SIGTERM, 10*time.Second)
	ag, err := c.Bins.Agent(spool, c.LogDir, "a1", c.Concurrency, nil)
	if err != nil {
		return Run{}, err
	}
	defer ag.Stop(syscall.SIGTERM, 10*time.Second)
	daemons := map[string]*sys.Proc{"agentd": ag, "managerd": md, "watchdogd": wd}
	for _, p := range []*sys.Proc{wd, md, ag} {
		if _, err := farrob.WaitReady(p); err != nil {
			return Run{}, err
		}
	}
	fr := &FarroRun{PeakKiB: map[string]int64{}, CPU: map[string]time.Duration{}, Strace: map[string]string{}, Perf: map[string]string{}}
	if m, err := sys.ReadMem(md.PID()); err == nil {
		fr.MgrBaseKiB = m.RSS
	}
	inodes0 := countInodes(spool)
	cpu0 := map[string]time.Duration{}
	for name, p := range daemons {
		cpu0[name], _ = sys.CPUTime(p.PID())
	}
	var straces []*sys.Proc
	if c.Strace {
		for name, p := range daemons {
			out := filepath.Join(c.LogDir, fmt.Sprintf("strace-%s-%d.txt", name, time.Now().UnixNano()))
			sp, err := sys.Start("strace-"+name, exec.Command("strace", "-f", "-c", "-w", "-o", out, "-p", strconv.Itoa(p.PID())), out+".log")
			if err != nil {
				return Run{}, err
			}
			straces = append(straces, sp)
			defer func() {
				sp.Stop(syscall.SIGINT, 10*time.Second)
				b, _ := os.ReadFile(out)
				fr.Strace[name] = string(b)
			}()
		}
		time.Sleep(500 * time.Millisecond) // attached to every thread
	}
	var perfs []*sys.Proc
	if c.Perf {
		for _, name := range []string{"agentd", "managerd"} {
			data := filepath.Join(c.LogDir, fmt.Sprintf("perf-%s-%d.data", name, time.Now().UnixNano()))
			pp, err := sys.Start("perf-"+name, exec.Command("perf", "record", "-F", "997", "-g", "-o", data, "-p", strconv.Itoa(daemons[name].PID())), data+".log")
			if err != nil {
				return Run{}, err
			}
			perfs = append(perfs, pp)
			defer func() {
				pp.Stop(syscall.SIGINT, 30*time.Second)
				// Kernel vs the daemon's own code, then the daemon's own
				// symbols (percent of its user-space samples).
				byDSO, _ := exec.Command("perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso", "--percent-limit", "1", "-g", "none").Output()
				user, _ := exec.Command("perf", "report", "-i", data, "--stdio", "--no-children", "--dsos", name, "--percentage", "relative",
					"--sort", "symbol", "--percent-limit", "2", "-g", "none").Output()
				fr.Perf[name] = string(byDSO) + "\n# " + name + "'s own code:\n" + string(user)
			}()
		}
		time.Sleep(500 * time.Millisecond)
	}
	start := time.Now()
	if _, err := c.ctl("crawl", "start", crawlName, "--seed", c.Seed, "--scope", "host", "--max-depth", "1000",
		"--delay", "0s", "--jitter", "0s", "--max-in-flight-per-domain", "1000", "--max-in-flight", "1000", "--allow-private",
		"--max-pages", strconv.Itoa(c.MaxPages)); err != nil {
		return Run{}, err
	}
	deadline := start.Add(c.Timeout)
	var polls int
	var inFlight float64
	states := map[string]float64{}
	for {
		time.Sleep(100 * time.Millisecond)
		out, err := c.ctl("crawl", "status", crawlName, "--json")
		if err != nil {
			return Run{}, err
		}
		if err := json.Unmarshal(out, &fr.Status); err != nil {
			return Run{}, fmt.Errorf("crawl status --json: %v: %s", err, tailStr(string(out), 500))
		}
		if fr.Status.State == "done" {
			break
		}
		polls++
		inFlight += float64(fr.Status.InFlight)
		for k, v := range fr.Status.JobStates {
			states[k] += float64(v)
		}
		if fr.Status.State != "running" {
			return Run{}, fmt.Errorf("crawl state %s", fr.Status.State)
		}
		if time.Now().After(deadline) {
			return Run{}, fmt.Errorf("crawl not done within %s: %+v", c.Timeout, fr.Status)
		}
	}
	elapsed := time.Since(start)
	if polls > 0 {
		fr.InFlight, fr.States = inFlight/float64(polls), map[string]float64{}
		for k, v := range states {
			fr.States[k] = v / float64(polls)
		}
	}
	r := Run{Tool: "farro", Elapsed: elapsed, Farro: fr}
	for name, p := range daemons {
		t, _ := sys.CPUTime(p.PID())
		fr.CPU[name] = t - cpu0[name]
		if m, err := sys.ReadMem(p.PID()); err == nil {
			fr.PeakKiB[name] = m.HWM
			r.SumKiB += m.HWM
			r.PeakKiB = max(r.PeakKiB, m.HWM)
		}
	}
	for _, pp := range perfs {
		pp.Stop(syscall.SIGINT, 30*time.Second)
	}
	for _, sp := range straces {
		sp.Stop(syscall.SIGINT, 10*time.Second) // strace prints its summary on detach
	}
	cdir := filepath.Join(spool, "crawls", crawlName)
	fr.SpoolInodes = countInodes(spool) - inodes0
	fr.BodyDisk = duAlloc(filepath.Join(cdir, "bodies"), nil)
	fr.FrontierDisk = duAlloc(cdir, func(rel string) bool { return rel == "bodies" || rel == "gates" })
	for _, d := range []string{"completed", "incoming", "in-progress", "deferred", "stale", "held"} {
		fr.JobDisk += duAlloc(filepath.Join(spool, d), nil)
	}
	return r, nil
}

// countInodes counts the distinct inodes under root (root included):
// every file and directory, a hard-linked file once.
func countInodes(root string) int64 {
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			seen[st.Ino] = true
		}
		return nil
	})
	return int64(len(seen))
}

// duAlloc adds up the allocated size of every file and directory under
// root, leaving out the top-level entries skip says so.
func duAlloc(root string, skip func(rel string) bool) int64 {
	var total int64
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if skip != nil && d.IsDir() && skip(rel) {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total
}
