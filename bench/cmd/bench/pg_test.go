package main

import (
	"reflect"
	"testing"

	"github.com/farro-dev/farro/bench/internal/report"
)

const (
	pgTP    = "durable throughput farro on PostgreSQL / River tuned (PostgreSQL)"
	pgPick  = "pickup p50 farro on PostgreSQL / River tuned p50"
	pgClaim = "claim cost at 1M / at 1k (farro on PostgreSQL, Claim+Commit p50)"
)

func yesNo(v string, def bool) bool {
	switch v {
	case "yes":
		return true
	case "no":
		return false
	}
	return def
}

func TestPGFlagsDefaults(t *testing.T) {
	t.Parallel()
	full := parsePGFlags(true, "", "", yesNo)
	if !full.on || full.skip != "" || full.claims != 2000 || full.runs4 != 1 || !reflect.DeepEqual(full.depths, []int{1000, 1000000}) {
		t.Fatalf("full: %+v", full)
	}
	smoke := parsePGFlags(false, "", "", yesNo)
	if !smoke.on || smoke.claims != 200 || !reflect.DeepEqual(smoke.depths, []int{1000, 10000}) {
		t.Fatalf("smoke: %+v", smoke)
	}
	off := parsePGFlags(false, "no", "1000, 50000", yesNo)
	if off.on || off.skip != "-pg no" || !reflect.DeepEqual(off.depths, []int{1000, 50000}) {
		t.Fatalf("-pg no: %+v", off)
	}
	if (config{pg: off, parts: map[string]bool{"pickup": true}}).pgWanted() {
		t.Fatal("-pg no is wanted")
	}
	if !(config{pg: smoke, parts: map[string]bool{"pgclaim": true}}).pgWanted() || (config{pg: smoke, parts: map[string]bool{"exec": true}}).pgWanted() {
		t.Fatal("pgWanted does not follow -only")
	}
}

func TestPGGoalsFullRun(t *testing.T) {
	t.Parallel()
	cfg := config{mode: "full", peers: true, scale: []int{1000}, pg: parsePGFlags(true, "", "", yesNo)}
	r := report.New()
	r.Cols = []string{"root", "journal"}
	for k, v := range map[string]float64{
		"pg1x4": 2400, "river-tuned": 2000, "pick-pg.p50": 6, "pick-river-tuned.p50": 4,
	} {
		r.SetNum(k, "root", v)
	}
	r.SetNum("river-tuned", "journal", 1000)
	r.SetNum("pick-pg.p50", "journal", 2)
	r.SetNum("pick-river-tuned.p50", "journal", 4)
	r.SetNum("pg-claim", "1k", 2.0)
	r.SetNum("pg-claim", "1M", 2.6)
	goals(cfg, r, []column{{key: "root"}, {key: "journal"}})

	wantMeasured(t, findGoal(t, r, "root", pgTP), "1.20x", true)
	wantMeasured(t, findGoal(t, r, "root", pgPick), "1.50x", false)
	wantMeasured(t, findGoal(t, r, "root", pgClaim), "1.30x", true)
	wantUnmeasured(t, findGoal(t, r, "journal", pgTP), "figure missing")
	wantMeasured(t, findGoal(t, r, "journal", pgPick), "0.50x", true)
	wantUnmeasured(t, findGoal(t, r, "journal", pgClaim), "runs on the root column only")
}

func TestPGGoalsClaimCostNotMet(t *testing.T) {
	t.Parallel()
	cfg := config{mode: "full", peers: true, pg: parsePGFlags(true, "", "", yesNo)}
	r := report.New()
	r.Cols = []string{"root"}
	r.SetNum("pg-claim", "1k", 2.0)
	r.SetNum("pg-claim", "1M", 4.0)
	goals(cfg, r, []column{{key: "root"}})
	wantMeasured(t, findGoal(t, r, "root", pgClaim), "2.00x", false)
}

func TestPGGoalsSmoke(t *testing.T) {
	t.Parallel()
	cfg := config{mode: "smoke", scale: []int{500}, pg: parsePGFlags(false, "", "", yesNo)}
	r := report.New()
	r.Cols = []string{"root"}
	r.SetNum("pg1x4", "root", 900)
	r.SetNum("pick-pg.p50", "root", 3)
	r.SetNum("pg-claim", "1k", 2.0)
	r.SetNum("pg-claim", "10k", 3.0)
	goals(cfg, r, []column{{key: "root"}})

	wantUnmeasured(t, findGoal(t, r, "root", pgTP), "peers not run")
	wantUnmeasured(t, findGoal(t, r, "root", pgPick), "peers not run")
	wantMeasured(t, findGoal(t, r, "root", "claim cost at 10k / at 1k (farro on PostgreSQL, Claim+Commit p50)"), "1.50x", true)
	wantUnmeasured(t, findGoal(t, r, "root", pgClaim), "1M not run (-pg-depths up to 10k")
}

func TestPGGoalsNotRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		pg     *pgConfig
		reason string
	}{
		{"not installed", &pgConfig{on: true, skip: "postgresql is not installed", depths: []int{1000, 10000}}, "not run: postgresql is not installed"},
		{"-pg no", parsePGFlags(true, "no", "", yesNo), "not run: -pg no"},
		{"no pg config", nil, "not run: -pg no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config{mode: "full", peers: true, pg: tc.pg}
			r := report.New()
			r.Cols = []string{"root"}
			r.SetNum("river-tuned", "root", 2000)
			r.SetNum("pick-river-tuned.p50", "root", 4)
			goals(cfg, r, []column{{key: "root"}})
			for _, label := range []string{pgTP, pgPick, pgClaim} {
				wantUnmeasured(t, findGoal(t, r, "root", label), tc.reason)
			}
		})
	}
}

func TestPGGoalsClaimNotInOnly(t *testing.T) {
	t.Parallel()
	cfg := config{mode: "full", peers: true, parts: map[string]bool{"throughput": true}, pg: parsePGFlags(true, "", "", yesNo)}
	r := report.New()
	r.Cols = []string{"root"}
	goals(cfg, r, []column{{key: "root"}})
	wantUnmeasured(t, findGoal(t, r, "root", pgClaim), "not in -only")
	wantUnmeasured(t, findGoal(t, r, "root", pgPick), "not in -only")
}

// -pg-only keeps River tuned beside farro on PostgreSQL and leaves the
// other systems out of the throughput and pickup figures.
func TestPGOnlyMeasuresRiverTunedOnly(t *testing.T) {
	all, pgOnly := config{}, config{pgOnly: true}
	for _, sys := range []string{"spool", "river-default", "river-tuned", "others"} {
		if !all.measures(sys) {
			t.Errorf("without -pg-only %s is not measured", sys)
		}
		if pgOnly.measures(sys) != (sys == "river-tuned") {
			t.Errorf("-pg-only: measures(%s) = %v", sys, pgOnly.measures(sys))
		}
	}
}
