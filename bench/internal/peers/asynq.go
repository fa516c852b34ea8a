package peers

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/farro-dev/farro/bench/internal/stats"
)

// AsynqTuning is an asynq server configuration; zero fields are asynq's
// defaults (TaskCheckInterval 1s).
type AsynqTuning struct {
	Name              string
	TaskCheckInterval time.Duration
}

// AsynqDefault and AsynqTuned are the two configurations measured, both
// with Concurrency 4.
var (
	AsynqDefault = AsynqTuning{Name: "default"}
	AsynqTuned   = AsynqTuning{Name: "tuned", TaskCheckInterval: 10 * time.Millisecond}
)

// Asynq is asynq against one Redis.
type Asynq struct {
	opt    asynq.RedisClientOpt
	rdb    *redis.Client
	client *asynq.Client
	insp   *asynq.Inspector
}

// NewAsynq connects to the Redis at addr.
func NewAsynq(addr string) *Asynq {
	opt := asynq.RedisClientOpt{Addr: addr}
	return &Asynq{opt: opt, rdb: redis.NewClient(&redis.Options{Addr: addr}), client: asynq.NewClient(opt), insp: asynq.NewInspector(opt)}
}

// Close closes the clients.
func (a *Asynq) Close() {
	a.client.Close()
	a.insp.Close()
	a.rdb.Close()
}

// reset empties Redis. The client is replaced too: it caches which
// queues it has registered, and FLUSHALL forgets them.
func (a *Asynq) reset(ctx context.Context) error {
	if err := a.rdb.FlushAll(ctx).Err(); err != nil {
		return err
	}
	a.client.Close()
	a.client = asynq.NewClient(a.opt)
	return nil
}

func (a *Asynq) server(t AsynqTuning, startedCh chan<- startedTask) (*asynq.Server, *asynq.ServeMux) {
	srv := asynq.NewServer(a.opt, asynq.Config{
		Concurrency:       4,
		TaskCheckInterval: t.TaskCheckInterval,
		LogLevel:          asynq.FatalLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(ctx context.Context, task *asynq.Task) error {
		if startedCh != nil {
			startedCh <- startedTask{id: task.ResultWriter().TaskID(), t: time.Now()}
		}
		return nil
	})
	return srv, mux
}

type startedTask struct {
	id string
	t  time.Time
}

// Enqueue times n sequential Client.Enqueue calls.
func (a *Asynq) Enqueue(ctx context.Context, n int) (time.Duration, error) {
	if err := a.reset(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := a.enqueue(n); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func (a *Asynq) enqueue(n int) error {
	for i := 0; i < n; i++ {
		if _, err := a.client.Enqueue(asynq.NewTask("noop", []byte(fmt.Sprintf(`{"n":%d}`, i)))); err != nil {
			return fmt.Errorf("asynq Enqueue: %w", err)
		}
	}
	return nil
}

// BurnDown enqueues n tasks, starts a server and times until all n are
// processed (asynq's processed counter, incremented when a task is marked
// done in Redis) and none is active, polled every 10 ms.
func (a *Asynq) BurnDown(ctx context.Context, t AsynqTuning, n int, timeout time.Duration) (time.Duration, error) {
	if err := a.reset(ctx); err != nil {
		return 0, err
	}
	if err := a.enqueue(n); err != nil {
		return 0, err
	}
	srv, mux := a.server(t, nil)
	start := time.Now()
	if err := srv.Start(mux); err != nil {
		return 0, err
	}
	defer srv.Shutdown()
	deadline := start.Add(timeout)
	for {
		qi, err := a.insp.GetQueueInfo("default")
		if err != nil {
			return 0, err
		}
		if qi.ProcessedTotal >= n && qi.Active == 0 && qi.Pending == 0 {
			if qi.FailedTotal > 0 {
				return 0, fmt.Errorf("asynq: %d tasks failed", qi.FailedTotal)
			}
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("asynq %s: %d of %d processed after %s", t.Name, qi.ProcessedTotal, n, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Pickup times Enqueue (start) to handler (start) on an idle queue.
func (a *Asynq) Pickup(ctx context.Context, t AsynqTuning, probes int) (stats.Latency, error) {
	if err := a.reset(ctx); err != nil {
		return stats.Latency{}, err
	}
	ch := make(chan startedTask, 16)
	srv, mux := a.server(t, ch)
	if err := srv.Start(mux); err != nil {
		return stats.Latency{}, err
	}
	defer srv.Shutdown()
	time.Sleep(200 * time.Millisecond)
	var lat []time.Duration
	for i := 0; i < probes; i++ {
		t0 := time.Now()
		info, err := a.client.Enqueue(asynq.NewTask("noop", []byte(fmt.Sprintf(`{"n":%d}`, i))))
		if err != nil {
			return stats.Latency{}, err
		}
		timeout := time.After(30 * time.Second)
	wait:
		for {
			select {
			case s := <-ch:
				if s.id == info.ID {
					lat = append(lat, s.t.Sub(t0))
					break wait
				}
			case <-timeout:
				return stats.Latency{}, fmt.Errorf("asynq %s pickup: task %s not handled within 30s", t.Name, info.ID)
			}
		}
		time.Sleep(stats.ProbeGap())
	}
	return stats.Lat(lat), nil
}
