package ctl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// FindPausedKind is the note (not a problem) of fsck on a database that
// lists a paused kind.
const FindPausedKind = "paused-kind"

// storeFsck is fsck on a PostgreSQL store: a consistency check of the
// database's jobs, leases and states ((*pgstore.Store).Check) printed as
// the spool's findings are, with the same summary and exit codes. The
// schema is read first, without opening the store (which refuses a
// schema that is not this build's): a mismatch is the one finding.
// --repair: an expired lease is taken by one recovery pass (as
// watchdogd's, with --grace as the lease grace), a stale request and a
// stray lease are cleared; the rest is report only.
func (c *Ctl) storeFsck(o FsckOptions) error {
	ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	defer cancel()
	db, _, err := pgstore.Status(ctx, c.Store)
	if err != nil {
		return fmt.Errorf("%s: %s", storeName(c.Store), oneLine(err.Error()))
	}
	if p, ok := pgstore.SchemaProblem(db); ok {
		return c.fsckReport([]*Finding{schemaFinding(p, db)}, o, nil)
	}
	st, err := pgstore.Open(ctx, c.Store)
	if err != nil {
		return fmt.Errorf("%s: %s", storeName(c.Store), oneLine(err.Error()))
	}
	defer st.Close()
	r, err := st.Check(ctx, pgstore.CheckOptions{Grace: o.Grace})
	if err != nil {
		return fmt.Errorf("%s: %s", storeName(c.Store), oneLine(err.Error()))
	}
	rec := &recoveryPass{st: st, ctx: ctx, grace: o.Grace}
	for _, p := range r.Problems {
		if p.Kind == pgstore.ProblemLeaseExpired {
			rec.ids = append(rec.ids, p.ID)
		}
	}
	var findings []*Finding
	for _, p := range r.Problems {
		findings = append(findings, storeFinding(ctx, st, rec, p, r.SchemaVersion))
	}
	for _, p := range r.Paused {
		detail := fmt.Sprintf("kind %s paused since %s", p.Kind, p.PausedAt.Format(time.RFC3339))
		if p.By != "" {
			detail += " by " + p.By
		}
		if p.User != "" {
			detail += " (" + p.User + "@" + p.Host + ")"
		}
		if p.Reason != "" {
			detail += ": " + oneLine(p.Reason)
		}
		findings = append(findings, &Finding{Kind: FindPausedKind, Path: "paused_kinds", Detail: detail, Note: true,
			Action: "report only: not a problem; its queued jobs wait until farroctl resume " + p.Kind})
	}
	return c.fsckReport(findings, o, nil)
}

func schemaFinding(p pgstore.Problem, db int) *Finding {
	f := &Finding{Kind: p.Kind, Path: "farro_schema_version", Detail: p.Detail,
		Action: "report only: run farroctl migrate --store URL (it applies this build's migrations)"}
	if db > pgstore.SchemaVersion() {
		f.Action = "report only: upgrade farro (a newer farro migrated the database; nothing of this build may write to it)"
	}
	return f
}

// storeFinding is a database problem as a finding: its table as the
// path, the action fsck proposes and, where --repair acts, its fix.
func storeFinding(ctx context.Context, st *pgstore.Store, rec *recoveryPass, p pgstore.Problem, db int) *Finding {
	f := &Finding{Kind: p.Kind, ID: p.ID, Path: "jobs", Detail: p.Detail}
	switch p.Kind {
	case pgstore.ProblemSchema:
		return schemaFinding(p, db)
	case pgstore.ProblemLeaseExpired:
		f.Action = "recover: one recovery pass moves it to stale, as watchdogd does (is a watchdogd running on some host?)"
		f.fix = func() (string, error) { return rec.outcome(p.ID) }
	case pgstore.ProblemAgentGone:
		f.Path = "agents"
		f.Action = "report only: the lease is the judge; recovery takes the job once its lease has expired"
	case pgstore.ProblemHolder:
		f.Action = "report only: no claim can write it; recovery takes it once its lease has expired"
		if p.StrayLease {
			f.Action = "clear the lease"
			f.fix = func() (string, error) {
				if err := st.ClearLease(ctx, p.ID); err != nil {
					return "", err
				}
				return "lease cleared", nil
			}
		}
	case pgstore.ProblemHistory:
		f.Path = "job_events"
		f.Action = "report only: fsck never rewrites a job's history; compare farroctl show and farroctl history"
	case pgstore.ProblemStaleControl:
		f.Action = "remove the request"
		f.fix = func() (string, error) {
			err := st.ClearStaleControl(ctx, p)
			if errors.Is(err, store.ErrBusy) {
				return "", errors.New("busy: its row is locked now; run fsck again")
			}
			if err != nil {
				return "", err
			}
			return "removed", nil
		}
	default:
		f.Action = "report only"
	}
	return f
}

// recoveryPass is the one recovery pass of a database's fsck --repair,
// of the jobs reported with an expired lease only, run by the first
// lease-expired fix; each fix then reads its job's outcome.
type recoveryPass struct {
	st    *pgstore.Store
	ctx   context.Context
	grace time.Duration
	ids   []string
	once  sync.Once
	outs  map[string]job.Outcome
	err   error
}

func (r *recoveryPass) outcome(id string) (string, error) {
	r.once.Do(func() {
		outs, err := r.st.RecoverJobs(r.ctx, r.ids, store.RecoverOptions{Actor: Actor, Grace: r.grace})
		r.outs, r.err = map[string]job.Outcome{}, err
		for _, o := range outs {
			r.outs[o.ID] = o
		}
	})
	if r.err != nil {
		return "", r.err
	}
	out, ok := r.outs[id]
	if !ok {
		return "", errors.New("the recovery pass did not take it (its lease renewed, or its row changed meanwhile); run fsck again")
	}
	return describe(out), nil
}
