package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

func TestMain(m *testing.M) { testpg.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// freshDB is an empty database of its own on the package's server.
func freshDB(t *testing.T) string {
	return testpg.NewDatabase(t, testpg.Start(t))
}

// newStore migrates a fresh database and opens a Store on it.
func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	url := freshDB(t)
	if _, err := Migrate(ctxT(t), url); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctxT(t), url, WithScratch(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, url
}

// sqlConn is a plain connection to url, for what a test does by hand.
func sqlConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func submit(t *testing.T, s *Store, reqs ...job.SubmitRequest) []*job.Job {
	t.Helper()
	for i := range reqs {
		if reqs[i].Kind == "" {
			reqs[i].Kind = "noop"
		}
		if reqs[i].Prompt == nil {
			reqs[i].Prompt = []byte(`{"n":1}`)
		}
	}
	jobs, errs := s.Submit(ctxT(t), reqs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	return jobs
}

func claimOne(t *testing.T, s *Store, agent string, lease time.Duration) store.Claim {
	t.Helper()
	cs, err := s.Claim(ctxT(t), job.Holder{Actor: "agentd/" + agent, Agent: agent}, store.ClaimOptions{Max: 1, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(cs))
	}
	return cs[0]
}

func status(t *testing.T, s *Store, id string) job.State {
	t.Helper()
	j, err := s.Get(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return j.Status
}
