package peers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/farro-dev/farro/bench/internal/stats"
)

// RiverTuning is a River client configuration; zero fields are River's
// defaults (FetchCooldown 100ms, FetchPollInterval 1s).
type RiverTuning struct {
	Name              string
	FetchCooldown     time.Duration
	FetchPollInterval time.Duration
}

// RiverDefault and RiverTuned are the two configurations measured, both
// with MaxWorkers 4 in the default queue.
var (
	RiverDefault = RiverTuning{Name: "default"}
	RiverTuned   = RiverTuning{Name: "tuned", FetchCooldown: time.Millisecond, FetchPollInterval: 10 * time.Millisecond}
)

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	started chan<- started // nil: not reported
}

type started struct {
	id int64
	t  time.Time
}

func (w *noopWorker) Work(ctx context.Context, j *river.Job[noopArgs]) error {
	if w.started != nil {
		w.started <- started{id: j.ID, t: time.Now()}
	}
	return nil
}

// riverDB is what the figures need of one River database, whatever its
// driver: the driver, a statement that empties river_job, and a query of
// how many jobs are completed.
type riverDB[TTx any] struct {
	name   string // for errors: "river", "river sqlite"
	driver riverdriver.Driver[TTx]
	reset  func(ctx context.Context) error
	done   func(ctx context.Context) (int, error)
}

func migrate[TTx any](ctx context.Context, drv riverdriver.Driver[TTx]) error {
	m, err := rivermigrate.New(drv, nil)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError + 4}))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func (db riverDB[TTx]) client(t RiverTuning, startedCh chan<- started) (*river.Client[TTx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{started: startedCh})
	return river.NewClient(db.driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers:           workers,
		FetchCooldown:     t.FetchCooldown,
		FetchPollInterval: t.FetchPollInterval,
		Logger:            quiet(),
	})
}

// burnDown inserts n jobs (InsertMany), then starts a client and times
// until all n are completed in the database (polled every 10 ms).
func (db riverDB[TTx]) burnDown(ctx context.Context, t RiverTuning, n int, timeout time.Duration) (time.Duration, error) {
	if err := db.reset(ctx); err != nil {
		return 0, err
	}
	c, err := db.client(t, nil)
	if err != nil {
		return 0, err
	}
	if err := insertMany(ctx, c, n); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		return 0, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	}()
	deadline := start.Add(timeout)
	for {
		done, err := db.done(ctx)
		if err != nil {
			return 0, err
		}
		if done >= n {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s %s: %d of %d completed after %s", db.name, t.Name, done, n, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func insertMany[TTx any](ctx context.Context, c *river.Client[TTx], n int) error {
	const batch = 1000
	for i := 0; i < n; i += batch {
		ps := make([]river.InsertManyParams, 0, batch)
		for k := i; k < min(n, i+batch); k++ {
			ps = append(ps, river.InsertManyParams{Args: noopArgs{N: k}})
		}
		if _, err := c.InsertMany(ctx, ps); err != nil {
			return fmt.Errorf("river InsertMany: %w", err)
		}
	}
	return nil
}

// insertOne times n sequential Client.Insert calls (a transaction each).
func (db riverDB[TTx]) insertOne(ctx context.Context, n int) (time.Duration, error) {
	if err := db.reset(ctx); err != nil {
		return 0, err
	}
	c, err := db.client(RiverDefault, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := c.Insert(ctx, noopArgs{N: i}, nil); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// insertMany times inserting n jobs with InsertMany in batches of 1000.
func (db riverDB[TTx]) insertMany(ctx context.Context, n int) (time.Duration, error) {
	if err := db.reset(ctx); err != nil {
		return 0, err
	}
	c, err := db.client(RiverDefault, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := insertMany(ctx, c, n); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// pickup times Insert (start) to Work (start) on an idle queue.
func (db riverDB[TTx]) pickup(ctx context.Context, t RiverTuning, probes int) (stats.Latency, error) {
	if err := db.reset(ctx); err != nil {
		return stats.Latency{}, err
	}
	ch := make(chan started, 16)
	c, err := db.client(t, ch)
	if err != nil {
		return stats.Latency{}, err
	}
	if err := c.Start(ctx); err != nil {
		return stats.Latency{}, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	}()
	time.Sleep(500 * time.Millisecond) // let the producer settle (leader election, listener)
	var lat []time.Duration
	for i := 0; i < probes; i++ {
		t0 := time.Now()
		res, err := c.Insert(ctx, noopArgs{N: i}, nil)
		if err != nil {
			return stats.Latency{}, err
		}
		timeout := time.After(30 * time.Second)
	wait:
		for {
			select {
			case s := <-ch:
				if s.id == res.Job.ID {
					lat = append(lat, s.t.Sub(t0))
					break wait
				}
			case <-timeout:
				return stats.Latency{}, fmt.Errorf("%s %s pickup: job %d not worked within 30s", db.name, t.Name, res.Job.ID)
			}
		}
		time.Sleep(stats.ProbeGap())
	}
	return stats.Lat(lat), nil
}

// River is a River schema in a PostgreSQL database.
type River struct {
	pool *pgxpool.Pool
	db   riverDB[pgx.Tx]
}

// NewRiver connects and runs River's migrations.
func NewRiver(ctx context.Context, dsn string) (*River, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	drv := riverpgxv5.New(pool)
	if err := migrate(ctx, drv); err != nil {
		pool.Close()
		return nil, err
	}
	return &River{pool: pool, db: riverDB[pgx.Tx]{
		name:   "river",
		driver: drv,
		reset: func(ctx context.Context) error {
			_, err := pool.Exec(ctx, "TRUNCATE river_job")
			return err
		},
		done: func(ctx context.Context) (int, error) {
			var n int
			err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
			return n, err
		},
	}}, nil
}

// Close closes the pool.
func (r *River) Close() { r.pool.Close() }

// BurnDown inserts n jobs (InsertMany), then starts a client and times
// until all n are completed in the database (polled every 10 ms).
func (r *River) BurnDown(ctx context.Context, t RiverTuning, n int, timeout time.Duration) (time.Duration, error) {
	return r.db.burnDown(ctx, t, n, timeout)
}

// InsertOne times n sequential Client.Insert calls (a transaction each).
func (r *River) InsertOne(ctx context.Context, n int) (time.Duration, error) {
	return r.db.insertOne(ctx, n)
}

// InsertMany times inserting n jobs with InsertMany in batches of 1000.
func (r *River) InsertMany(ctx context.Context, n int) (time.Duration, error) {
	return r.db.insertMany(ctx, n)
}

// Pickup times Insert (start) to Work (start) on an idle queue.
func (r *River) Pickup(ctx context.Context, t RiverTuning, probes int) (stats.Latency, error) {
	return r.db.pickup(ctx, t, probes)
}
