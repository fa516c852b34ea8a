package agent

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/pkg/job"
)

// BenchmarkBurnDown runs b.N no-op jobs, queued beforehand, through one
// agent with 4 slots: the agent's cost per job (go test -bench BurnDown
// -cpuprofile ...). Throughput targets live in bench/, not here.
func BenchmarkBurnDown(b *testing.B) {
	dir := b.TempDir()
	if d := os.Getenv("FARRO_BENCH_DIR"); d != "" {
		// Another filesystem (a journaled ext4, a tmpfs): a fresh
		// directory in it per run, as b.N grows.
		var err error
		if dir, err = os.MkdirTemp(d, "burndown"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	s, err := job.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]job.SubmitRequest, b.N)
	for i := range reqs {
		reqs[i] = job.SubmitRequest{ID: fmt.Sprintf("b%07d", i), Kind: "noop", Prompt: []byte("{}")}
	}
	for i := 0; i < len(reqs); i += 1000 {
		if _, errs := s.SubmitMany(reqs[i:min(i+1000, len(reqs))]); errs[0] != nil {
			b.Fatal(errs[0])
		}
	}
	a, err := New(Config{Spool: s, ID: "w1", Concurrency: 4, Handlers: map[string]Handler{"noop": Noop}, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0 := cpuTime(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	// The poll is one stat: a directory's link count is 2 plus its
	// subdirectories (a listing every 5 ms cost as much CPU as the agent,
	// and counted in cpu-ms/job). ext4 reports 1 past 65,000: listed then.
	for {
		var st syscall.Stat_t
		if err := syscall.Stat(s.StateDir(job.Succeeded), &st); err != nil {
			b.Fatal(err)
		}
		n := int(st.Nlink) - 2
		if st.Nlink < 2 {
			ents, _ := os.ReadDir(s.StateDir(job.Succeeded))
			n = len(ents)
		}
		if n >= b.N {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	cancel()
	<-done
	b.ReportMetric(float64(s.Syncs())/float64(b.N), "syncs/job")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/job")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
