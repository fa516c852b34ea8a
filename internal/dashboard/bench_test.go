package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
)

// The benchmarks render the pages over a spool of 100,000 jobs, shaped
// like a queue that has run for a while: most jobs finished, some
// waiting.
//
//	go test -run '^$' -bench 100k -benchtime 5x ./internal/dashboard
var bigSpool = struct {
	once sync.Once
	dir  string
	s    *job.Spool
	err  error
}{}

var bigShape = []struct {
	st job.State
	n  int
}{{job.Succeeded, 95000}, {job.Killed, 1000}, {job.Queued, 1000}, {job.Deferred, 1000}, {job.Held, 1000}, {job.Failed, 1000}}

func TestMain(m *testing.M) {
	code := m.Run()
	testpg.Stop() // the PostgreSQL of store_test.go, if started
	if bigSpool.dir != "" {
		os.RemoveAll(bigSpool.dir)
	}
	os.Exit(code)
}

// spool100k writes the fixture once per test process: the three files
// Spool.Submit writes for each job (pkg/job's marshalling), without its
// per-job fsyncs, as bench/'s fixture does.
func spool100k(b *testing.B) *job.Spool {
	b.Helper()
	bigSpool.once.Do(func() {
		t0 := time.Now()
		bigSpool.dir, bigSpool.err = os.MkdirTemp("", "farro-dash-bench-")
		if bigSpool.err != nil {
			return
		}
		s, err := job.Open(filepath.Join(bigSpool.dir, "spool"))
		if err != nil {
			bigSpool.err = err
			return
		}
		bigSpool.s = s
		base := time.Now().UTC().Add(-2 * time.Hour)
		i := 0
		var wg sync.WaitGroup
		errs := make(chan error, len(bigShape))
		for _, part := range bigShape {
			first := i
			i += part.n
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := first; k < first+part.n; k++ {
					if err := writeFixtureJob(s, base.Add(time.Duration(k)*time.Millisecond*50), k, part.st); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		bigSpool.err = <-errs
		fmt.Fprintf(os.Stderr, "fixture: %d jobs written in %s\n", i, time.Since(t0).Round(time.Millisecond))
	})
	if bigSpool.err != nil {
		b.Fatal(bigSpool.err)
	}
	return bigSpool.s
}

func writeFixtureJob(s *job.Spool, created time.Time, k int, st job.State) error {
	id := created.Format("20060102T150405.000000Z") + fmt.Sprintf("-%06x", k)
	kind := []string{"exec", "noop", "crawl.fetch"}[k%3]
	j := &job.Job{SchemaVersion: job.SchemaVersion, ID: id, Kind: kind, Status: st, CreatedAt: created, UpdatedAt: created, Attempts: 1}
	if st == job.Deferred {
		nb := created.Add(24 * time.Hour)
		j.NotBefore = &nb
	}
	ev, _ := json.Marshal(job.Event{Time: created, Actor: "bench", To: job.Queued, Reason: "submitted"})
	dir := s.JobDir(st, "", id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{job.PromptFile: []byte("{}"), job.JobFile: j.Marshal(), job.EventsFile: append(ev, '\n')} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func benchServer(b *testing.B) *Server {
	s := spool100k(b)
	srv, err := New(Config{Ctl: &ctl.Ctl{Root: s.Root, Stdout: io.Discard, Stderr: io.Discard}, ShapeEvery: time.Hour, ShapeWait: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

func benchGet(b *testing.B, srv *Server, path string) {
	b.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Host = "127.0.0.1"
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		b.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String())
	}
}

// BenchmarkOverview100k renders the overview: counts from directory
// listings (and the queued jobs' job.json, for the oldest), the last
// hour of the event stream, agents; the age shape is cached (computed
// once before the clock starts, as a live server keeps it).
func BenchmarkOverview100k(b *testing.B) {
	srv := benchServer(b)
	benchGet(b, srv, "/") // computes the shape
	b.ResetTimer()
	for b.Loop() {
		benchGet(b, srv, "/")
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
}

// BenchmarkJobsPage100k renders the first page of the job list (every
// state, newest first) and one of a state, and counts the job.json files
// each reads.
func BenchmarkJobsPage100k(b *testing.B) {
	srv := benchServer(b)
	pg, err := srv.cfg.Ctl.JobsPage(ctl.JobQuery{Limit: srv.cfg.PageSize})
	if err != nil {
		b.Fatal(err)
	}
	if pg.Listed != 100000 || pg.JobFilesRead != srv.cfg.PageSize {
		b.Fatalf("listed %d, read %d job.json for a page of %d", pg.Listed, pg.JobFilesRead, srv.cfg.PageSize)
	}
	b.ResetTimer()
	for b.Loop() {
		benchGet(b, srv, "/jobs")
		benchGet(b, srv, "/jobs?state=succeeded&offset=50000")
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(2*b.N), "ms/page")
	b.ReportMetric(float64(pg.JobFilesRead), "job.json/page")
}

// BenchmarkShape100k is the background pass behind the overview's ages
// and kinds (stats --ages), which reads every job.json.
func BenchmarkShape100k(b *testing.B) {
	srv := benchServer(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := srv.cfg.Ctl.ShapeOf(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/pass")
}
