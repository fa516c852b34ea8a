package farrob

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ClaimChildArg {
		// DeadHolder runs the test binary as its child.
		if err := ClaimChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	readyTimeout = 30 * time.Second
	code := m.Run()
	testpg.Stop()
	if binsDir != "" {
		_ = os.RemoveAll(binsDir)
	}
	os.Exit(code)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testPG is the package's private PostgreSQL as the figures see it, with
// its CPU read through the postmaster (a backend's parent).
func testPG(t *testing.T) PG {
	t.Helper()
	admin := testpg.Start(t)
	conn, err := pgx.Connect(ctxT(t), admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var backend int
	if err := conn.QueryRow(ctxT(t), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		t.Fatal(err)
	}
	postmaster := sys.ParentPID(backend)
	if postmaster <= 1 {
		t.Fatalf("postmaster of backend %d: %d", backend, postmaster)
	}
	return PG{Admin: admin, CPU: func() (time.Duration, error) { return sys.TreeCPU(postmaster) }}
}

var (
	binsOnce sync.Once
	bins     Bins
	binsErr  error
	binsDir  string
)

// testBins builds farro's binaries once for the package's tests.
func testBins(t *testing.T) Bins {
	t.Helper()
	binsOnce.Do(func() {
		binsDir, binsErr = os.MkdirTemp("", "farrob-bins-")
		if binsErr == nil {
			bins, binsErr = Build(filepath.Join("..", "..", ".."), filepath.Join(binsDir, "bin"))
		}
	})
	if binsErr != nil {
		t.Fatal(binsErr)
	}
	return bins
}

func TestFillPGQueuesClaimableJobsInAgeOrder(t *testing.T) {
	t.Parallel()
	pg := testPG(t)
	ctx := ctxT(t)
	dbURL, err := pg.NewDatabase(ctx, "t_fill")
	if err != nil {
		t.Fatal(err)
	}
	defer pg.DropDatabase(context.Background(), dbURL)
	if _, err := pgstore.Migrate(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	if err := FillPG(ctx, dbURL, 120, "noop"); err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	counts, err := st.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[job.Queued] != 120 {
		t.Fatalf("counts %v, want 120 queued", counts)
	}
	// The oldest (the smallest ID) is claimed first, and its history is
	// Submit's.
	var first string
	if err := st.List(ctx, store.Filter{States: []job.State{job.Queued}}, func(j *job.Job) error {
		if first == "" || j.ID < first {
			first = j.ID
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h, err := st.History(ctx, first)
	if err != nil || len(h) != 1 || h[0].To != job.Queued || h[0].Reason != "submitted" {
		t.Fatalf("history of %s: %+v %v", first, h, err)
	}
	cs, err := st.Claim(ctx, job.Holder{Actor: "agentd/t", Agent: "t"}, store.ClaimOptions{Max: 1})
	if err != nil || len(cs) != 1 || cs[0].Job().ID != first {
		t.Fatalf("claimed %v (%v), want %s first", cs, err, first)
	}
	res, err := PGClaimCost(pg, 120, 100)
	if err != nil {
		t.Fatal(err)
	}
	if res.Depth != 120 || res.Each.N != 100 || res.Each.P50 <= 0 || res.Mean <= 0 || res.Fill <= 0 {
		t.Fatalf("claim cost %+v", res)
	}
	if _, err := PGClaimCost(pg, 50, 100); err == nil || !strings.Contains(err.Error(), "100 claims from a queue of 50") {
		t.Fatalf("more claims than jobs: %v", err)
	}
}

func TestPGBurnDownAndPickupRunTheDaemons(t *testing.T) {
	t.Parallel()
	pg := testPG(t)
	b := testBins(t)
	logs := t.TempDir()
	res, err := b.PGBurnDown(PGBurnConfig{PG: pg, Base: t.TempDir(), LogDir: logs, Jobs: 60, Agents: 2, Concurrency: 2, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Jobs != 60 || res.Elapsed <= 0 || res.DBCPU <= 0 || res.AgentCPU <= 0 {
		t.Fatalf("burn-down %+v", res)
	}
	p, err := b.PGPickup(pg, t.TempDir(), logs, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.Start.N != 3 || p.Start.P50 <= 0 || p.Submit.N != 3 || p.Start.P50 < p.Submit.P50 {
		t.Fatalf("pickup %+v", p)
	}
	// Each job's start in agentd (its log line, read from the FIFO) was
	// stamped.
	if p.Claim.N != 3 || p.Claim.P50 <= 0 {
		t.Fatalf("pickup to agentd's start %+v", p)
	}
	// Every database the runs made is gone.
	conn, err := pgx.Connect(ctxT(t), pg.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left int
	if err := conn.QueryRow(ctxT(t), `SELECT count(*) FROM pg_database WHERE datname LIKE 'farro_burn_%' OR datname LIKE 'farro_pickup_%'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d databases left behind", left)
	}
}
