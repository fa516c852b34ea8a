package pgstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
)

// TestClaimReadsTheIndex: with many queued jobs (and statistics, as
// autovacuum keeps them), the claim statement's pick reads the claim
// index up to its LIMIT, whether or not a kind is paused; a plan that
// scans and sorts the whole table costs seconds a claim at a million
// queued jobs. With the paused test as an anti-join, or as a test of the
// kind column itself, the planner takes that plan (docs/POSTGRES.md says
// why). paused_kinds is read once per statement (an InitPlan): as a
// function called per row read it cost 43% of PostgreSQL's CPU in the
// burn-down.
func TestClaimReadsTheIndex(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	const batches, per = 10, 2000
	for b := 0; b < batches; b++ {
		reqs := make([]job.SubmitRequest, per)
		for i := range reqs {
			reqs[i] = job.SubmitRequest{Kind: "noop", Prompt: []byte(`{}`), Priority: i % 3}
		}
		if _, errs := s.Submit(ctxT(t), reqs); errs != nil {
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	c := sqlConn(t, url)
	if _, err := c.Exec(ctxT(t), "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	a := strings.Index(claimFastSQL, "WITH pick AS (") + len("WITH pick AS (")
	b := strings.Index(claimFastSQL, "\n), plain AS")
	pick := strings.NewReplacer("$1", "NULL::text[]", "$2", "8").Replace(claimFastSQL[a:b])
	plan := func(when string) {
		t.Helper()
		rows, err := c.Query(ctxT(t), "EXPLAIN "+pick)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		p := strings.Join(lines, "\n")
		if !strings.Contains(p, "Index Scan using jobs_claim_order") || strings.Contains(p, "Seq Scan on jobs") {
			t.Errorf("%s: the claim does not read the claim index:\n%s", when, p)
		}
		if !strings.Contains(p, "InitPlan") || strings.Contains(p, "SubPlan") || strings.Contains(p, "farro_kind_paused") {
			t.Errorf("%s: the claim does not read paused_kinds once per statement:\n%s", when, p)
		}
	}
	plan("no kind paused")
	if _, err := s.PauseKind(ctxT(t), PausedKind{Kind: "other"}); err != nil {
		t.Fatal(err)
	}
	plan("a kind paused")
	if _, err := s.ResumeKind(ctxT(t), "other"); err != nil {
		t.Fatal(err)
	}
	plan(fmt.Sprintf("after a resume (%d queued)", batches*per))
}
