package farrob

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/bench/internal/stats"
	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// PG is the PostgreSQL server the farro-on-PostgreSQL figures use: the
// benchmark's private instance, the one River's figures use too.
type PG struct {
	// Admin is a URL of the server's maintenance database (postgres);
	// each run creates a fresh database of its own beside it.
	Admin string
	// CPU is the instance's CPU time so far (utime+stime of the
	// postmaster and its backends); nil: not measured.
	CPU func() (time.Duration, error)
}

// NewDatabase creates an empty database on the server and returns its URL.
func (pg PG) NewDatabase(ctx context.Context, prefix string) (string, error) {
	u, err := url.Parse(pg.Admin)
	if err != nil {
		return "", fmt.Errorf("postgres url: %w", err)
	}
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := prefix + "_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, pg.Admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// DropDatabase removes a database NewDatabase made (its connections are
// ended first).
func (pg PG) DropDatabase(ctx context.Context, dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, pg.Admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+" WITH (FORCE)")
	return err
}

// Migrate runs `farroctl migrate` (the real binary) on the database.
func (b Bins) Migrate(dbURL string) error {
	cmd := exec.Command(b.Path("farroctl"), "migrate")
	cmd.Env = append(cleanEnv(), "FARRO_STORE="+dbURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("farroctl migrate: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// StoreAgent starts agentd on a PostgreSQL store: --store dbURL, local its
// local directory (--spool), --id id --concurrency conc [--exec cmd...].
func (b Bins) StoreAgent(local, dbURL, logDir, id string, conc int, execCmd []string) (*sys.Proc, error) {
	args := []string{"--store", dbURL, "--id", id, "--concurrency", strconv.Itoa(conc)}
	if len(execCmd) > 0 {
		args = append(append(args, "--exec"), execCmd...)
	}
	return b.daemon("agentd", local, logDir, "agentd-"+id, args)
}

// StartStoreSupport starts watchdogd and managerd on --store dbURL (local:
// their --spool) and waits until each is ready. On a database they log no
// "ready" line: each tells systemd READY=1 after its first pass, so each
// runs with NOTIFY_SOCKET naming a datagram socket the benchmark reads.
func (b Bins) StartStoreSupport(local, logDir, dbURL string) (*Support, error) {
	s := &Support{}
	var err error
	if s.WD, s.WDReady, err = b.notified("watchdogd", local, logDir, []string{"--store", dbURL}); err != nil {
		return nil, err
	}
	if s.MD, s.MDReady, err = b.notified("managerd", local, logDir, []string{"--store", dbURL}); err != nil {
		s.WD.Stop(syscall.SIGTERM, 10*time.Second)
		return nil, err
	}
	return s, nil
}

// notified starts bin with NOTIFY_SOCKET and waits for its READY=1
// (readyTimeout), or its exit.
func (b Bins) notified(bin, spool, logDir string, args []string) (*sys.Proc, time.Duration, error) {
	dir, err := os.MkdirTemp("", "farro-notify-") // short: a socket path has at most 107 bytes
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "n")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close()
	cmd := exec.Command(b.Path(bin), append([]string{"--spool", spool}, args...)...)
	cmd.Env = append(cleanEnv(), "NOTIFY_SOCKET="+sock)
	p, err := sys.Start(bin, cmd, filepath.Join(logDir, fmt.Sprintf("%s-%d.log", bin, time.Now().UnixNano())))
	if err != nil {
		return nil, 0, err
	}
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				got <- err
				return
			}
			for _, l := range strings.Split(string(buf[:n]), "\n") {
				if l == "READY=1" {
					got <- nil
					return
				}
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			p.Kill()
			return nil, 0, fmt.Errorf("%s: notify socket: %w", bin, err)
		}
		return p, time.Since(p.Started), nil
	case <-p.Done():
		return nil, 0, fmt.Errorf("%s exited before it was ready (log %s)", bin, p.Log)
	case <-time.After(readyTimeout):
		p.Kill()
		return nil, 0, fmt.Errorf("%s not ready after %s (log %s)", bin, readyTimeout, p.Log)
	}
}

// PGSubmitBatch is how many jobs one pgstore Submit call carries when a
// burn-down queues its jobs (River's InsertMany batches are as large).
const PGSubmitBatch = 1000

// PGBurnConfig is one burn-down of farro on PostgreSQL.
type PGBurnConfig struct {
	PG          PG
	Base        string // the local directories are made below it
	LogDir      string
	Jobs        int
	Agents      int
	Concurrency int
	Timeout     time.Duration
}

// PGBurnResult is what a burn-down on PostgreSQL measured.
type PGBurnResult struct {
	BurnResult
	// PostgreSQL's CPU time from the first Submit to the last job
	// succeeded (the inserts, the daemons' start and the work); 0 if
	// PG.CPU is nil.
	DBCPU time.Duration
}

// PGBurnDown is BurnDown on PostgreSQL: a fresh database migrated by
// `farroctl migrate`, cfg.Jobs noop jobs queued through pgstore's Submit in
// batches of PGSubmitBatch, watchdogd and managerd on --store started and
// ready, then the clock runs from the exec of the agents until every job
// is succeeded (SELECT count(*) every 10 ms, as River's burn-down polls).
func (b Bins) PGBurnDown(cfg PGBurnConfig) (PGBurnResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout+5*time.Minute)
	defer cancel()
	root, err := os.MkdirTemp(cfg.Base, "farro-pgburn-")
	if err != nil {
		return PGBurnResult{}, err
	}
	defer sys.RemoveTree(root)
	local := filepath.Join(root, "local") // laid out by the first daemon
	if err := os.Mkdir(local, 0o755); err != nil {
		return PGBurnResult{}, err
	}
	dbURL, err := cfg.PG.NewDatabase(ctx, "farro_burn")
	if err != nil {
		return PGBurnResult{}, err
	}
	defer cfg.PG.DropDatabase(context.Background(), dbURL)
	if err := b.Migrate(dbURL); err != nil {
		return PGBurnResult{}, err
	}
	// The database's CPU is counted from here: the inserts and the work
	// (as River's figure counts its InsertMany and its work).
	var cpu0 time.Duration
	if cfg.PG.CPU != nil {
		if cpu0, err = cfg.PG.CPU(); err != nil {
			return PGBurnResult{}, fmt.Errorf("postgres cpu: %w", err)
		}
	}
	if err := SubmitPG(ctx, dbURL, cfg.Jobs, "noop"); err != nil {
		return PGBurnResult{}, err
	}
	count, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return PGBurnResult{}, err
	}
	defer count.Close(context.Background())
	sup, err := b.StartStoreSupport(local, cfg.LogDir, dbURL)
	if err != nil {
		return PGBurnResult{}, err
	}
	defer sup.Stop()
	var agents []*sys.Proc
	defer func() {
		for _, a := range agents {
			a.Stop(syscall.SIGTERM, 10*time.Second)
		}
	}()
	start := time.Now()
	for i := 0; i < cfg.Agents; i++ {
		a, err := b.StoreAgent(local, dbURL, cfg.LogDir, fmt.Sprintf("pg%d", i+1), cfg.Concurrency, nil)
		if err != nil {
			return PGBurnResult{}, err
		}
		agents = append(agents, a)
	}
	succeeded := func() (n int, err error) {
		err = count.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'succeeded'`).Scan(&n)
		return n, err
	}
	if err := waitSucceeded("burn-down on postgres", succeeded, cfg.Jobs, cfg.Timeout, start, agents, cfg.LogDir); err != nil {
		return PGBurnResult{}, err
	}
	res := PGBurnResult{BurnResult: BurnResult{Jobs: cfg.Jobs, Elapsed: time.Since(start)}}
	if cfg.PG.CPU != nil {
		cpu1, err := cfg.PG.CPU()
		if err != nil {
			return PGBurnResult{}, fmt.Errorf("postgres cpu: %w", err)
		}
		res.DBCPU = cpu1 - cpu0
	}
	for _, a := range agents {
		if c, err := sys.CPUTime(a.PID()); err == nil {
			res.AgentCPU += c
		}
		if m, err := sys.ReadMem(a.PID()); err == nil && m.HWM > res.AgentHWM {
			res.AgentHWM = m.HWM
		}
	}
	var bad int
	if err := count.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status IN ('failed', 'killed')`).Scan(&bad); err != nil {
		return res, err
	}
	if bad > 0 {
		return res, fmt.Errorf("burn-down on postgres: %d jobs failed or killed", bad)
	}
	return res, nil
}

// SubmitPG queues n jobs of kind with pgstore's Submit, PGSubmitBatch per
// call (one transaction each).
func SubmitPG(ctx context.Context, dbURL string, n int, kind string) error {
	st, err := pgstore.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	for done := 0; done < n; {
		k := min(PGSubmitBatch, n-done)
		reqs := make([]job.SubmitRequest, k)
		for i := range reqs {
			reqs[i] = job.SubmitRequest{Kind: kind, Prompt: []byte(`{}`), Actor: "bench"}
		}
		_, errs := st.Submit(ctx, reqs)
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("submit: %w", err)
			}
		}
		done += k
	}
	return nil
}

// PGPickup is Pickup on PostgreSQL: watchdogd, managerd and one agentd
// (--concurrency 4) on --store, whose exec handler writes the job's id
// into a FIFO the benchmark reads; one job at a time is submitted through
// pgstore's Submit (one durable transaction) and timed from the start of
// the call to the handler's line. Each probe waits until the previous job
// has succeeded plus stats.ProbeGap.
func (b Bins) PGPickup(pg PG, base, logDir string, probes int) (PickupResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(probes)*15*time.Second+2*time.Minute)
	defer cancel()
	root, err := os.MkdirTemp(base, "farro-pgpickup-")
	if err != nil {
		return PickupResult{}, err
	}
	defer sys.RemoveTree(root)
	local := filepath.Join(root, "local") // laid out by the first daemon
	if err := os.Mkdir(local, 0o755); err != nil {
		return PickupResult{}, err
	}
	dbURL, err := pg.NewDatabase(ctx, "farro_pickup")
	if err != nil {
		return PickupResult{}, err
	}
	defer pg.DropDatabase(context.Background(), dbURL)
	if err := b.Migrate(dbURL); err != nil {
		return PickupResult{}, err
	}
	fifo := filepath.Join(root, "started.fifo")
	ff, started, err := readStamps(fifo)
	if err != nil {
		return PickupResult{}, err
	}
	defer ff.Close()
	st, err := pgstore.Open(ctx, dbURL)
	if err != nil {
		return PickupResult{}, err
	}
	defer st.Close()
	sup, err := b.StartStoreSupport(local, logDir, dbURL)
	if err != nil {
		return PickupResult{}, err
	}
	defer sup.Stop()
	// agentd logs into a FIFO the benchmark reads: each line is stamped as
	// it is written (a job's "queued -> in-progress" line is written as
	// the slot starts it, before the handler's exec) and copied to the
	// log file.
	logFIFO := filepath.Join(root, "agentd-log.fifo")
	lf, runs, logCopy, err := stampLog(logFIFO, filepath.Join(logDir, fmt.Sprintf("agentd-pgp1-%d.log", time.Now().UnixNano())))
	if err != nil {
		return PickupResult{}, err
	}
	defer lf.Close()
	a, err := b.storeAgentLog(local, dbURL, logFIFO, "pgp1", 4, []string{"/bin/sh", "-c", `printf '%s\n' "$FARRO_JOB_ID" > ` + fifo})
	if err != nil {
		return PickupResult{}, err
	}
	a.Log = logCopy
	defer a.Stop(syscall.SIGTERM, 10*time.Second)
	if _, err := WaitReady(a); err != nil {
		return PickupResult{}, err
	}
	var startLat, subLat, runLat []time.Duration
	for i := 0; i < probes; i++ {
		t0 := time.Now()
		jobs, errs := st.Submit(ctx, []job.SubmitRequest{{Kind: "exec", Prompt: []byte(`{}`), Actor: "bench"}})
		if errs[0] != nil {
			return PickupResult{}, errs[0]
		}
		subLat = append(subLat, time.Since(t0))
		id := jobs[0].ID
		timeout := time.After(10 * time.Second)
		var ran, began bool
		for !ran || !began {
			select {
			case s := <-started:
				if s.id == id {
					startLat = append(startLat, s.t.Sub(t0))
					began = true
				}
			case s := <-runs:
				if s.id == id {
					runLat = append(runLat, s.t.Sub(t0))
					ran = true
				}
			case <-timeout:
				return PickupResult{}, fmt.Errorf("pickup on postgres: job %s not started within 10s (started %v, in agentd's log %v; logs in %s)", id, began, ran, logDir)
			}
		}
		if err := waitStatus(ctx, st, id, job.Succeeded, 10*time.Second); err != nil {
			return PickupResult{}, err
		}
		time.Sleep(stats.ProbeGap())
	}
	return PickupResult{Claim: stats.Lat(runLat), Start: stats.Lat(startLat), Submit: stats.Lat(subLat)}, nil
}

// storeAgentLog is StoreAgent logging to logPath (a FIFO stampLog reads).
func (b Bins) storeAgentLog(local, dbURL, logPath, id string, conc int, execCmd []string) (*sys.Proc, error) {
	args := []string{"--spool", local, "--store", dbURL, "--id", id, "--concurrency", strconv.Itoa(conc), "--exec"}
	cmd := exec.Command(b.Path("agentd"), append(args, execCmd...)...)
	cmd.Env = cleanEnv()
	return sys.Start("agentd-"+id, cmd, logPath)
}

// stampLog makes fifo, reads the JSON log lines written into it and
// copies each to copyPath; the lines of a job's queued -> in-progress
// transition are sent on the channel, stamped as read (their job_id).
// The reader holds fifo open read-write, so that the writer's open
// does not wait and its exit is no end of file.
func stampLog(fifo, copyPath string) (*os.File, <-chan stamp, string, error) {
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return nil, nil, "", err
	}
	ff, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, "", err
	}
	out, err := os.OpenFile(copyPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		ff.Close()
		return nil, nil, "", err
	}
	runs := make(chan stamp, 64)
	go func() {
		defer out.Close()
		sc := bufio.NewScanner(ff)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			t := time.Now()
			if bytes.Contains(line, []byte(`"to":"in-progress"`)) {
				var l struct {
					JobID string `json:"job_id"`
				}
				if json.Unmarshal(line, &l) == nil && l.JobID != "" {
					select {
					case runs <- stamp{id: l.JobID, t: t}:
					default: // nobody is waiting for this one
					}
				}
			}
			_, _ = out.Write(append(line, '\n'))
		}
	}()
	return ff, runs, copyPath, nil
}

// waitStatus polls the job every millisecond until it has status want.
func waitStatus(ctx context.Context, st *pgstore.Store, id string, want job.State, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		j, err := st.Get(ctx, id)
		if err != nil {
			return err
		}
		if j.Status == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s is %s after %s, want %s", id, j.Status, timeout, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// FillPG puts n queued jobs of kind into a migrated database with COPY
// (jobs and their "submitted" events, as Submit writes them), then
// ANALYZE, so that a claim-cost figure can be taken at a depth of
// millions without millions of Submit calls. IDs have the shape of
// generated ones and sort by creation time (the claim order's age_key is
// the time the ID carries, as Submit writes it).
func FillPG(ctx context.Context, dbURL string, n int, kind string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	base := time.Now().UTC().Add(-time.Duration(n) * time.Microsecond).Truncate(time.Microsecond)
	const chunk = 50000
	for from := 0; from < n; from += chunk {
		to := min(n, from+chunk)
		jobs := make([][]any, 0, to-from)
		events := make([][]any, 0, to-from)
		for i := from; i < to; i++ {
			t := base.Add(time.Duration(i) * time.Microsecond)
			id := t.Format("20060102T150405.000000Z") + fmt.Sprintf("-%06x", i&0xffffff)
			age, ok := job.IDTime(id)
			if !ok {
				return fmt.Errorf("fill: id %s carries no time", id)
			}
			jobs = append(jobs, []any{id, job.SchemaVersion, kind, string(job.Queued), 0, 0, t, t, []byte(`{}`), age})
			events = append(events, []any{id, t, "bench", string(job.Queued), "submitted"})
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"},
			[]string{"id", "schema_version", "kind", "status", "priority", "max_attempts", "created_at", "updated_at", "prompt", "age_key"},
			pgx.CopyFromRows(jobs)); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("fill: copy jobs: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"job_events"},
			[]string{"job_id", "time", "actor", "to_state", "reason"}, pgx.CopyFromRows(events)); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("fill: copy events: %w", err)
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, `ANALYZE jobs; ANALYZE job_events`)
	return err
}

// ClaimCost is store.Claim + Commit(succeeded) timed at one queue depth.
type ClaimCost struct {
	Depth int
	Fill  time.Duration // FillPG's time (not a farro figure)
	Each  stats.Latency // one Claim (max 1) + its Commit, per job
	Mean  time.Duration // mean of the same
}

// PGClaimCost fills a fresh database with depth queued jobs (FillPG),
// then claims and commits claims of them one at a time, in process, one
// goroutine, through pgstore (after a few untimed ones, which open the
// pool's connection): the claim transaction's cost at that depth.
func PGClaimCost(pg PG, depth, claims int) (ClaimCost, error) {
	if claims > depth {
		return ClaimCost{}, fmt.Errorf("claim cost: %d claims from a queue of %d", claims, depth)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dbURL, err := pg.NewDatabase(ctx, "farro_claims")
	if err != nil {
		return ClaimCost{}, err
	}
	defer pg.DropDatabase(context.Background(), dbURL)
	if _, err := pgstore.Migrate(ctx, dbURL); err != nil {
		return ClaimCost{}, err
	}
	t0 := time.Now()
	if err := FillPG(ctx, dbURL, depth, "noop"); err != nil {
		return ClaimCost{}, err
	}
	res := ClaimCost{Depth: depth, Fill: time.Since(t0)}
	st, err := pgstore.Open(ctx, dbURL)
	if err != nil {
		return ClaimCost{}, err
	}
	defer st.Close()
	h := job.Holder{Actor: "agentd/bench", Agent: "bench"}
	one := func() error {
		cs, err := st.Claim(ctx, h, store.ClaimOptions{Max: 1, Lease: time.Minute})
		if err != nil {
			return err
		}
		if len(cs) != 1 {
			return errors.New("claim cost: the queue ran dry")
		}
		return cs[0].Commit(ctx, job.Succeeded, "", nil)
	}
	warm := min(10, depth-claims)
	for i := 0; i < warm; i++ {
		if err := one(); err != nil {
			return ClaimCost{}, err
		}
	}
	lat := make([]time.Duration, 0, claims)
	var sum time.Duration
	for i := 0; i < claims; i++ {
		t := time.Now()
		if err := one(); err != nil {
			return ClaimCost{}, err
		}
		d := time.Since(t)
		lat = append(lat, d)
		sum += d
	}
	res.Each = stats.Lat(lat)
	if claims > 0 {
		res.Mean = sum / time.Duration(claims)
	}
	return res, nil
}
