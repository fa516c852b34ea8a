package ctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// Kinds of fsck findings, in the order they are reported and repaired.
const (
	FindOrphanLock     = "orphan-lock"          // lock of a dead owner, or ownerless past the grace
	FindLockNoJob      = "lock-without-job"     // lock of a live owner with no job: report only
	FindForeignLock    = "foreign-lock"         // lock held from another machine sharing the spool: report only
	FindDuplicate      = "duplicate"            // one ID in several places: report only
	FindHostile        = "hostile"              // symlink or file where a job or lock must be
	FindUnreadable     = "unreadable"           // job.json missing or malformed
	FindUnknownSchema  = "unknown-schema"       // schema_version this build does not know: report only
	FindStatusMismatch = "status-mismatch"      // job.json status disagrees with the directory
	FindUnlocked       = "unlocked-in-progress" // in-progress job without a claim lock
	FindStaleControl   = "stale-control"        // control.json of a job that is not running
	FindTmpLeftover    = "tmp-leftover"         // entry in tmp/ older than the grace
	FindStrayTemp      = "stray-temp"           // atomic-write temp file left behind
)

// FsckOptions are fsck's flags.
type FsckOptions struct {
	Repair bool
	JSON   bool
	// Grace is the age below which an ownerless lock, a tmp/ entry or a
	// temp file is left alone as possibly in use (default 30s); on a
	// database, how long a lease must have expired to be reported and
	// recovered.
	Grace time.Duration
}

// DefaultGrace is fsck's default --grace.
const DefaultGrace = 30 * time.Second

// Finding is one problem fsck found, the action it proposes and, after a
// repair, what happened.
type Finding struct {
	Kind     string `json:"kind"`
	ID       string `json:"id,omitempty"`
	Path     string `json:"path"` // relative to the spool root
	Detail   string `json:"detail"`
	Action   string `json:"action"` // proposed; "report only: ..." when fsck will not touch it
	Repaired bool   `json:"repaired"`
	Result   string `json:"result,omitempty"` // after --repair
	// Note: not a problem, listed for the operator (a database's paused
	// kinds); it counts in no total and leaves the exit code alone.
	Note bool `json:"note,omitempty"`
	fix  func() (string, error)
}

// Repairable reports whether --repair acts on f.
func (f *Finding) Repairable() bool { return f.fix != nil }

// Check scans the spool and returns its findings without changing
// anything. now is used for ages; grace as in FsckOptions.
func Check(s *job.Spool, grace time.Duration, now time.Time) ([]*Finding, error) {
	ck := &checker{s: s, grace: grace, now: now}
	if err := ck.run(); err != nil {
		return nil, err
	}
	var out []*Finding
	for _, kind := range []string{FindOrphanLock, FindLockNoJob, FindForeignLock, FindDuplicate, FindHostile, FindUnreadable,
		FindUnknownSchema, FindStatusMismatch, FindUnlocked, FindStaleControl, FindTmpLeftover, FindStrayTemp} {
		for _, f := range ck.found {
			if f.Kind == kind {
				out = append(out, f)
			}
		}
	}
	return out, nil
}

type checker struct {
	s     *job.Spool
	grace time.Duration
	now   time.Time
	found []*Finding
}

func (ck *checker) add(f *Finding) {
	f.Path = relPath(ck.s, f.Path)
	ck.found = append(ck.found, f)
}

func (ck *checker) run() error {
	es, err := walk(ck.s, nil)
	if err != nil {
		return err
	}
	byID := map[string][]entry{}
	for _, e := range es {
		if e.Hostile {
			ck.hostile(e.Path, fmt.Sprintf("%s in %s/ is not a directory (symlink or file)", e.Name, e.State.Dir()))
			continue
		}
		byID[e.Name] = append(byID[e.Name], e)
	}
	dups := map[string]bool{}
	for id, list := range byID {
		if len(list) > 1 && stillEverywhere(list) {
			dups[id] = true
			paths := make([]string, len(list))
			for i, e := range list {
				paths[i] = relPath(ck.s, e.Path)
			}
			ck.add(&Finding{Kind: FindDuplicate, ID: id, Path: list[0].Path,
				Detail: "the job is in " + strings.Join(paths, " and "),
				Action: "report only: fsck never guesses which copy is right; compare their job.json and events.jsonl, keep one and move the other out of the spool by hand"})
		}
	}
	if err := ck.locks(byID, dups); err != nil {
		return err
	}
	for _, e := range es {
		if e.Hostile {
			continue
		}
		ck.strayTemps(e.Path)
		if !dups[e.Name] {
			ck.job(e)
		}
	}
	for _, st := range job.States {
		ck.strayTemps(ck.s.StateDir(st))
	}
	agents, err := fsq.ScanDir(ck.s.StateDir(job.InProgress))
	if err != nil {
		return err
	}
	for _, a := range agents.Dirs {
		ck.strayTemps(ck.s.AgentDir(a))
	}
	return ck.tmp()
}

// stillEverywhere rules out a job seen twice only because it moved while
// the state directories were being listed: every copy must still exist,
// checked forwards and backwards.
func stillEverywhere(list []entry) bool {
	for pass := 0; pass < 2; pass++ {
		for i := range list {
			e := list[i]
			if pass == 1 {
				e = list[len(list)-1-i]
			}
			if _, err := os.Lstat(e.Path); err != nil {
				return false
			}
		}
	}
	return true
}

func (ck *checker) hostile(path, detail string) {
	s := ck.s
	ck.add(&Finding{Kind: FindHostile, Path: path, Detail: detail,
		Action: "quarantine to corrupt/",
		fix: func() (string, error) {
			fi, err := os.Lstat(path)
			if errors.Is(err, fs.ErrNotExist) {
				return "already gone", nil
			}
			if err == nil && fi.IsDir() {
				return "", errors.New("it is a directory now; run fsck again")
			}
			q, err := s.Quarantine(path, "farroctl fsck: "+detail)
			if err != nil {
				return "", err
			}
			return "quarantined to " + relPath(s, q), nil
		}})
}

// locks checks every claim lock.
func (ck *checker) locks(byID map[string][]entry, dups map[string]bool) error {
	ids, err := locks(ck.s)
	if err != nil {
		return err
	}
	for _, id := range ids {
		path := ck.s.LockPath(id)
		if err := job.ValidateID(id); err != nil {
			ck.hostile(path, "lock directory with an invalid job ID: "+err.Error())
			continue
		}
		li, err := readLock(ck.s, id, ck.now)
		if err != nil {
			return err
		}
		if li == nil {
			continue // released meanwhile
		}
		dead, why := li.dead(ck.grace, ck.now)
		switch {
		case li.Owner != nil && proc.Check(li.Owner.Identity) == proc.Foreign:
			ck.add(&Finding{Kind: FindForeignLock, ID: id, Path: path,
				Detail: fmt.Sprintf("held by %s pid %d on another machine (host %s, machine id %s)%s", li.Owner.Actor, li.Owner.PID, li.Owner.Hostname, li.Owner.MachineID, jobWhere(byID[id])),
				Action: "report only: not ours to judge; check that process on its own machine (its fsck or watchdogd recovers it there)"})
		case dead && dups[id]:
			ck.add(&Finding{Kind: FindOrphanLock, ID: id, Path: path, Detail: why,
				Action: "report only: the job is in several places; resolve the duplicate first"})
		case dead:
			ck.add(&Finding{Kind: FindOrphanLock, ID: id, Path: path, Detail: why + jobWhere(byID[id]),
				Action: "recover the job (roll its half-done transaction forward or back) and remove the lock",
				fix:    ck.recoverLock(id, li, why)})
		case li.Owner != nil && len(byID[id]) == 0 && ck.now.Sub(li.mtime) >= ck.grace:
			if _, err := ck.s.LocateSettled(id, Actor); errors.Is(err, job.ErrNotFound) {
				ck.add(&Finding{Kind: FindLockNoJob, ID: id, Path: path,
					Detail: fmt.Sprintf("held for %s by live owner %s pid %d, and there is no job %s", ck.now.Sub(li.mtime).Round(time.Second), li.Owner.Actor, li.Owner.PID, id),
					Action: "report only: the owner is alive; stop it (its lock goes when it exits and fsck runs again)"})
			}
		}
	}
	return nil
}

func jobWhere(list []entry) string {
	if len(list) == 0 {
		return "; no job with this ID"
	}
	return "; job in " + list[0].State.Dir() + "/"
}

func (ck *checker) recoverLock(id string, seen *LockInfo, why string) func() (string, error) {
	s, grace := ck.s, ck.grace
	return func() (string, error) {
		now := time.Now().UTC()
		cur, err := readLock(s, id, now)
		if err != nil {
			return "", err
		}
		if cur == nil {
			return "lock already gone", nil
		}
		if !bytes.Equal(cur.raw, seen.raw) || cur.Problem != seen.Problem {
			return "", errors.New("the lock changed since the scan; run fsck again")
		}
		if dead, _ := cur.dead(grace, now); !dead {
			return "", errors.New("its owner is alive now; left alone")
		}
		// Like watchdogd: the job moves on only once every execution of
		// it is gone, or the next attempt could overlap this one.
		if ex := s.StopExecutions(id, s.LockPath(id)); ex.Waiting {
			if ex.Err != nil {
				return "", fmt.Errorf("not repaired: cannot prove its executions gone: %w", ex.Err)
			}
			return "", fmt.Errorf("not repaired: an execution of the job still ran (killed: %v); run fsck --repair again", ex.Killed)
		}
		judged := cur.raw
		if judged == nil {
			judged = []byte{}
		}
		out, err := s.RecoverJudgedLock(id, Actor, "lock owner dead ("+why+"), recovered by farroctl fsck", judged)
		if err != nil {
			return "", err
		}
		return describe(out), nil
	}
}

func describe(out job.Outcome) string {
	switch out.Action {
	case job.ActionNone:
		if out.Detail != "" {
			return "lock removed (" + out.Detail + ")"
		}
		return "lock removed; the job was consistent"
	case "quarantined":
		return "job unreadable: quarantined to " + out.Detail
	}
	msg := fmt.Sprintf("%s: %s -> %s", out.Action, out.From, out.To)
	if out.Detail != "" {
		msg += " (" + out.Detail + ")"
	}
	return msg
}

// job checks one job directory (not a duplicate).
func (ck *checker) job(e entry) {
	s, id := ck.s, e.Name
	j, err := job.ReadJob(e.Path)
	switch {
	case errors.Is(err, fsq.ErrVanished):
		return // moved meanwhile
	case errors.Is(err, job.ErrSchema):
		ck.add(&Finding{Kind: FindUnknownSchema, ID: id, Path: e.Path, Detail: oneLine(err.Error()),
			Action: "report only: run a farro that understands this schema version; the job is left where it is"})
		return
	case errors.Is(err, job.ErrCorrupt):
		if job.ValidateID(id) == nil && lockExists(s, id) {
			ck.add(&Finding{Kind: FindUnreadable, ID: id, Path: e.Path, Detail: oneLine(err.Error()),
				Action: "quarantine to corrupt/ once its lock is free (a dead lock is recovered first, which quarantines it)",
				fix:    ck.quarantineJob(e, err)})
			return
		}
		ck.add(&Finding{Kind: FindUnreadable, ID: id, Path: e.Path, Detail: oneLine(err.Error()),
			Action: "quarantine to corrupt/", fix: ck.quarantineJob(e, err)})
		return
	case err != nil:
		ck.add(&Finding{Kind: FindUnreadable, ID: id, Path: e.Path, Detail: oneLine(err.Error()),
			Action: "report only: cannot be read (check permissions)"})
		return
	}
	if e.State != job.InProgress {
		ck.staleControl(e)
	}
	mismatch := j.Status != e.State
	if e.State != job.InProgress && !mismatch {
		return
	}
	if lockExists(s, id) {
		return // a live holder is mid-transaction, or the orphan-lock finding covers it
	}
	// Look again: the job may have finished a transaction between the
	// read and the lock check.
	j2, err := job.ReadJob(e.Path)
	if err != nil || j2.Status != j.Status {
		return
	}
	if e.State == job.InProgress {
		ck.add(&Finding{Kind: FindUnlocked, ID: id, Path: e.Path,
			Detail: fmt.Sprintf("in %s/ with status %s and no claim lock", filepath.Dir(relPath(s, e.Path)), j.Status),
			Action: "reconcile: take the lock and recover the job (in-progress goes to stale/, a half-done commit is completed)",
			fix:    ck.reconcile(id, "in-progress without a claim lock")})
		return
	}
	ck.add(&Finding{Kind: FindStatusMismatch, ID: id, Path: e.Path,
		Detail: fmt.Sprintf("status %s in %s/", j.Status, e.State.Dir()),
		Action: "reconcile: take the lock and roll the half-done transaction forward or back",
		fix:    ck.reconcile(id, fmt.Sprintf("status %s disagreed with directory %s/", j.Status, e.State.Dir()))})
}

// staleControl reports an operator request left in a job that is not
// running: it reached the job while its agent was committing, and would
// stop the job's next attempt.
func (ck *checker) staleControl(e entry) {
	path := filepath.Join(e.Path, job.ControlFile)
	if _, err := os.Lstat(path); err != nil {
		return
	}
	s, id := ck.s, e.Name
	ck.add(&Finding{Kind: FindStaleControl, ID: id, Path: path,
		Detail: fmt.Sprintf("operator request left in a %s job (it came after the job stopped running)", e.State),
		Action: "remove, under the job's lock",
		fix: func() (string, error) {
			owner, _ := json.Marshal(job.NewOwner(Actor, ""))
			lock := s.LockPath(id)
			if err := fsq.TryLock(lock, append(owner, '\n')); err != nil {
				if errors.Is(err, fsq.ErrLocked) {
					return "", errors.New("busy: its lock is held now; run fsck again")
				}
				return "", err
			}
			defer fsq.Unlock(lock)
			if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
				return "already gone", nil
			}
			if err := fsq.RemoveAll(path); err != nil {
				return "", err
			}
			return "removed", nil
		}})
}

func lockExists(s *job.Spool, id string) bool {
	_, err := os.Lstat(s.LockPath(id))
	return err == nil
}

func (ck *checker) reconcile(id, why string) func() (string, error) {
	s := ck.s
	return func() (string, error) {
		out, err := s.Reconcile(id, Actor, why+", reconciled by farroctl fsck")
		if errors.Is(err, fsq.ErrLocked) {
			return "", errors.New("busy: its lock is held now; run fsck again")
		}
		if err != nil {
			return "", err
		}
		return describe(out), nil
	}
}

func (ck *checker) quarantineJob(e entry, cause error) func() (string, error) {
	s := ck.s
	return func() (string, error) {
		if _, err := os.Lstat(e.Path); errors.Is(err, fs.ErrNotExist) {
			return "already gone (moved by an earlier repair)", nil
		}
		if job.ValidateID(e.Name) == nil {
			owner, _ := json.Marshal(job.NewOwner(Actor, ""))
			lock := s.LockPath(e.Name)
			if err := fsq.TryLock(lock, append(owner, '\n')); err != nil {
				if errors.Is(err, fsq.ErrLocked) {
					return "", errors.New("its lock is held (busy, or a dead lock fsck could not recover)")
				}
				return "", err
			}
			defer fsq.Unlock(lock)
		}
		if _, err := job.ReadJob(e.Path); !errors.Is(err, job.ErrCorrupt) {
			if errors.Is(err, fsq.ErrVanished) {
				return "already gone", nil
			}
			return "", errors.New("no longer unreadable; run fsck again")
		}
		q, err := s.Quarantine(e.Path, "farroctl fsck: "+oneLine(cause.Error()))
		if err != nil {
			return "", err
		}
		return "quarantined to " + relPath(s, q), nil
	}
}

// tempName matches the temp files of fsq.WriteFile (renameio): a dot, the
// target's name, digits. Only farro's own file names count, so that a
// handler's dot files in its job directory are never touched.
// Compiled on first use: a package's initialisation runs at every start
// of every program that links it (farroctl --version included).
var tempName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\.(job\.json|control\.json|prompt\.json|result\.json|events\.jsonl|stdout\.log|stderr\.log)-?[0-9]+$`)
})

// strayTemps reports the atomic-write temp files left in dir by a crash.
func (ck *checker) strayTemps(dir string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		if !tempName().MatchString(de.Name()) || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil || ck.now.Sub(info.ModTime()) < ck.grace {
			continue
		}
		path := filepath.Join(dir, de.Name())
		ck.add(&Finding{Kind: FindStrayTemp, Path: path,
			Detail: fmt.Sprintf("temp file of an interrupted atomic write, %s old", ck.now.Sub(info.ModTime()).Round(time.Second)),
			Action: "remove", fix: removeFix(path, ck.grace, fsq.RemoveAll)})
	}
}

// tmp reports entries of tmp/ older than the grace: submits that died
// before renaming their job into a state directory. A build whose
// submitter is alive (it holds the build's flock: job.IsLiveBuild) is no
// leftover, whatever its age.
func (ck *checker) tmp() error {
	dir := ck.s.Path(job.TmpDir)
	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, de := range des {
		info, err := de.Info()
		if err != nil || ck.now.Sub(info.ModTime()) < ck.grace {
			continue
		}
		path := filepath.Join(dir, de.Name())
		if info.IsDir() && job.IsLiveBuild(path) {
			continue
		}
		ck.add(&Finding{Kind: FindTmpLeftover, Path: path,
			Detail: fmt.Sprintf("left by an interrupted submit, %s old", ck.now.Sub(info.ModTime()).Round(time.Second)),
			Action: "remove (the submit was never acknowledged)", fix: removeFix(path, ck.grace, job.RemoveTmpLeftover)})
	}
	return nil
}

// removeFix removes path with remove (fsq.RemoveAll, or for a tmp/ entry
// job.RemoveTmpLeftover, which leaves a live submit's build alone) unless
// it was modified within the grace.
func removeFix(path string, grace time.Duration, remove func(string) error) func() (string, error) {
	return func() (string, error) {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "already gone", nil
		}
		if err != nil {
			return "", err
		}
		if time.Since(fi.ModTime()) < grace {
			return "", errors.New("modified since the scan; left alone")
		}
		if err := remove(path); err != nil {
			return "", err
		}
		return "removed", nil
	}
}

// Fsck checks the spool and prints one line per finding: a plan, or with
// Repair what was done. The error's exit code is 0 when the spool is
// clean (or every finding was repaired) and 1 otherwise.
func (c *Ctl) Fsck(o FsckOptions) error {
	if o.Grace < 0 {
		return Usagef("--grace must not be negative")
	}
	if c.OnStore() {
		return c.storeFsck(o)
	}
	open := c.existing
	if o.Repair {
		open = c.open // repairs may need every state directory
	}
	s, err := open()
	if err != nil {
		return err
	}
	findings, err := Check(s, o.Grace, c.now())
	if err != nil {
		return err
	}
	return c.fsckReport(findings, o, func(ids auditIDs, failed int) {
		c.audit(s, job.Audit{Command: "fsck --repair", JobIDs: ids.ids, Count: ids.count, Failed: failed})
	})
}

// fsckReport prints findings (with Repair, repairs them first, one by
// one) and the summary, and returns fsck's outcome: nil when there is no
// problem (notes are not) or every one was repaired, else an ExitFail
// error. audit, if not nil, records the repairs.
func (c *Ctl) fsckReport(findings []*Finding, o FsckOptions, audit func(ids auditIDs, failed int)) error {
	problems := 0
	for _, f := range findings {
		if !f.Note {
			problems++
		}
	}
	unrepaired := 0
	for _, f := range findings {
		if o.Repair {
			if f.Note {
				f.Result = "nothing to repair"
			} else if f.fix == nil {
				f.Result = "not repaired: report only"
			} else if res, err := f.fix(); err != nil {
				f.Result = "not repaired: " + oneLine(err.Error())
			} else {
				f.Repaired, f.Result = true, res
			}
			if !f.Repaired && !f.Note {
				unrepaired++
			}
		}
		c.printFinding(f, o)
	}
	if o.Repair && problems > 0 && audit != nil {
		var ids auditIDs
		for _, f := range findings {
			if f.Repaired {
				ids.add(f.ID)
			}
		}
		audit(ids, unrepaired)
	}
	switch {
	case problems == 0:
		if !o.JSON {
			fmt.Fprintln(c.Stdout, "fsck: clean")
		}
		return nil
	case o.Repair && unrepaired == 0:
		if !o.JSON {
			fmt.Fprintf(c.Stdout, "fsck: %d findings, all repaired\n", problems)
		}
		return nil
	case o.Repair:
		return &Error{Code: ExitFail, Err: fmt.Errorf("fsck: %d of %d findings not repaired", unrepaired, problems)}
	}
	repairable := 0
	for _, f := range findings {
		if f.Repairable() {
			repairable++
		}
	}
	return &Error{Code: ExitFail, Err: fmt.Errorf("fsck: %d findings (%d repairable with --repair); nothing changed", problems, repairable)}
}

func (c *Ctl) printFinding(f *Finding, o FsckOptions) {
	if o.JSON {
		_ = json.NewEncoder(c.Stdout).Encode(f)
		return
	}
	what := f.Path
	if f.ID != "" {
		what = f.ID + " " + f.Path
	}
	line := fmt.Sprintf("%-20s %s: %s -> %s", f.Kind, what, f.Detail, f.Action)
	if o.Repair {
		line += " => " + f.Result
	}
	fmt.Fprintln(c.Stdout, line)
}
