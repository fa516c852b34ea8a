package peers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
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

// River is a River schema in a PostgreSQL database.
type River struct {
	pool *pgxpool.Pool
}

// NewRiver connects and runs River's migrations.
func NewRiver(ctx context.Context, dsn string) (*River, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	return &River{pool: pool}, nil
}

// Close closes the pool.
func (r *River) Close() { r.pool.Close() }

func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError + 4}))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func (r *River) client(t RiverTuning, startedCh chan<- started) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{started: startedCh})
	return river.NewClient(riverpgxv5.New(r.pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers:           workers,
		FetchCooldown:     t.FetchCooldown,
		FetchPollInterval: t.FetchPollInterval,
		Logger:            quiet(),
	})
}

func (r *River) reset(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, "TRUNCATE river_job")
	return err
}

// BurnDown inserts n jobs (InsertMany), then starts a client and times
// until all n are completed in the database (polled every 10 ms).
func (r *River) BurnDown(ctx context.Context, t RiverTuning, n int, timeout time.Duration) (time.Duration, error) {
	if err := r.reset(ctx); err != nil {
		return 0, err
	}
	c, err := r.client(t, nil)
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
		var done int
		if err := r.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&done); err != nil {
			return 0, err
		}
		if done >= n {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("river %s: %d of %d completed after %s", t.Name, done, n, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func insertMany(ctx context.Context, c *river.Client[pgx.Tx], n int) error {
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

// InsertOne times n sequential Client.Insert calls (a transaction each).
func (r *River) InsertOne(ctx context.Context, n int) (time.Duration, error) {
	if err := r.reset(ctx); err != nil {
		return 0, err
	}
	c, err := r.client(RiverDefault, nil)
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

// InsertMany times inserting n jobs with InsertMany in batches of 1000.
func (r *River) InsertMany(ctx context.Context, n int) (time.Duration, error) {
	if err := r.reset(ctx); err != nil {
		return 0, err
	}
	c, err := r.client(RiverDefault, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := insertMany(ctx, c, n); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// Pickup times Insert (start) to Work (start) on an idle queue.
func (r *River) Pickup(ctx context.Context, t RiverTuning, probes int) (stats.Latency, error) {
	if err := r.reset(ctx); err != nil {
		return stats.Latency{}, err
	}
	ch := make(chan started, 16)
	c, err := r.client(t, ch)
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
				return stats.Latency{}, fmt.Errorf("river %s pickup: job %d not worked within 30s", t.Name, res.Job.ID)
			}
		}
		time.Sleep(stats.ProbeGap())
	}
	return stats.Lat(lat), nil
}
