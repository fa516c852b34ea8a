package frontier

import (
	"errors"
	"io/fs"
	"sort"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// The frontier's side of the spool's domain registry (internal/crawl,
// registry.go): a domain the crawl meets for the first time takes its
// starting state from the registry (adopt); every status change of a
// domain is written back at the end of the step that made it, and the
// counters of the domains that changed every RegistryFlush (and when the
// driver stops); a domain held for the registry is looked up again every
// RegistryRecheck, so that a reset (or another crawl crawling it again)
// frees it. A registry that cannot be read or written never stops the
// crawl: the error is logged and the write tried again next step.

// RegistryFlush is how often the counters of changed domains are written
// back to the registry; RegistryRecheck how often a held domain's entry
// is read again; RegistryVerify how many domains a step compares with
// the registry after a start (a crash between the crawl's domain file and
// the registry's write loses the write-back of a status change: the
// entry's record of this crawl then differs from the domain's status).
const (
	RegistryFlush   = 10 * time.Second
	RegistryRecheck = 2 * time.Second
	RegistryVerify  = 256
	// RegistryLockWait bounds a step's wait for the registry's writer
	// lock: a holder that does not let go (a stuck farroctl, a planted
	// process) delays the write-back, never the crawl.
	RegistryLockWait = 250 * time.Millisecond
	// registryErrEvery spaces the log lines of a registry that keeps
	// failing (a full disk, a directory planted as its lock).
	registryErrEvery = 10 * time.Second
)

// buildRegistry builds the registry from the crawls' domain files on the
// first start of a frontier on a spool without one.
func (f *Frontier) buildRegistry(now time.Time) {
	if f.reg.Built() {
		return
	}
	plan, err := crawl.MigrateRegistry(f.cfg.Spool, false, now, func(err error) {
		f.log.Warn().Err(err).Msg("domain registry: file skipped")
	})
	if err != nil {
		f.log.Error().Err(err).Msg("cannot build the domain registry; trying again at the next start")
		return
	}
	f.log.Info().Int("domains", len(plan)).Msg("domain registry built from the crawls' domain files")
}

// adopt gives a domain new to the crawl its starting state from the
// registry, and marks it to be recorded there.
func (d *driver) adopt(dm *dom, now time.Time) {
	name := dm.d.Domain
	if _, ok := d.regDirty[name]; !ok {
		d.regDirty[name] = false // recorded as a crawl that knows it
	}
	e, err := d.f.reg.Load(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			d.log.Error().Err(err).Str("domain", name).Msg("domain registry entry unreadable; the domain starts pending")
		}
		return
	}
	if crawl.Adopt(e, dm.d, now) {
		d.log.Info().Str("domain", name).Str("status", string(dm.d.Status)).Str("reason", dm.d.Reason).Str("detail", dm.d.ReasonDetail).
			Msg("domain state taken from the registry")
	}
}

// noteRegistry marks a domain's status change for the registry.
func (d *driver) noteRegistry(name string) { d.regDirty[name] = true }

// flushRegistry writes back what changed: status changes at once,
// counters every RegistryFlush (all: force).
func (d *driver) flushRegistry(now time.Time, force bool) {
	counters := force || now.Sub(d.regSaved) >= RegistryFlush
	verify := map[string]bool{}
	for len(d.regVerify) > 0 && len(verify) < RegistryVerify {
		verify[d.regVerify[0]] = true
		d.regVerify = d.regVerify[1:]
	}
	if len(d.regDirty) == 0 && len(verify) == 0 && (!counters || len(d.regStale) == 0) {
		return
	}
	set := map[string]bool{}
	for n := range verify {
		set[n] = true
	}
	for n := range d.regDirty {
		set[n] = true
	}
	if counters {
		for n := range d.regStale {
			set[n] = true
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		if s := d.sums[n]; s != nil && !s.broken {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	errs, err := d.f.reg.Update(names, func(n string, e *crawl.RegistryEntry) *crawl.RegistryEntry {
		status := d.regDirty[n]
		if verify[n] && !status {
			// The summary says the status (domcache.go): the entity is
			// read only to write the entry.
			s := d.sums[n]
			seen := e.CrawlView(d.st.Name)
			if seen != nil && seen.Status == s.in.Status && seen.Reason == s.reason {
				if !d.regStale[n] || !counters {
					return nil // written back already
				}
			} else {
				status = true
			}
		}
		dm := d.get(n)
		if dm == nil {
			return nil // unreadable (logged)
		}
		dd := dm.d
		out, refused := crawl.Observe(e, d.cfg, dd, status, now)
		if refused != nil {
			d.log.Warn().Err(refused).Str("domain", n).Msg("domain registry kept its status")
		}
		return out
	})
	if err != nil {
		if now.Sub(d.regErrAt) >= registryErrEvery {
			d.regErrAt = now
			d.log.Error().Err(err).Int("domains", len(names)).Msg("cannot write the domain registry; retrying")
		}
		for n := range verify {
			d.regVerify = append(d.regVerify, n)
		}
		return
	}
	for _, n := range names {
		if e := errs[n]; e != nil {
			if errors.Is(e, crawl.ErrRegistrySchema) || errors.Is(e, crawl.ErrRegistryCorrupt) {
				d.log.Error().Err(e).Str("domain", n).Msg("domain registry entry")
			} else {
				d.log.Error().Err(e).Str("domain", n).Msg("cannot write the domain registry entry; retrying")
				continue
			}
		}
		delete(d.regDirty, n)
		delete(d.regStale, n)
	}
	if counters {
		d.regSaved = now
	}
}

// registryPending tells whether writes to the registry are still to make.
func (d *driver) registryPending() bool { return len(d.regDirty)+len(d.regStale) > 0 }

// leaveRegistry keeps a stopped driver whose last registry writes failed
// (its crawl done or cancelled: no driver would make them), for
// retryRegistry.
func (f *Frontier) leaveRegistry(name string, d *driver) {
	if d.registryPending() {
		f.regLeft[name] = d
	}
}

// retryRegistry makes the registry writes of stopped drivers.
func (f *Frontier) retryRegistry(now time.Time) {
	for name, d := range f.regLeft {
		d.flushRegistry(now, true)
		if !d.registryPending() {
			delete(f.regLeft, name)
		}
	}
}

// recheckHeld frees the domains held for the registry whose entry no
// longer holds them.
func (d *driver) recheckHeld(now time.Time) {
	if now.Sub(d.regChecked) < RegistryRecheck {
		return
	}
	d.regChecked = now
	for name := range d.held { // domcache.go: held, with URLs pending
		e, err := d.f.reg.Load(name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Error().Err(err).Str("domain", name).Msg("domain registry entry unreadable")
			continue
		}
		dm := d.get(name)
		if dm == nil {
			continue
		}
		dd := dm.d
		if !e.Releases(dd.RegistryHold, now) {
			continue
		}
		reason, detail := crawl.ReasonReset, "released by the domain registry"
		if e != nil {
			reason = e.Reason
			if reason == "" {
				reason = crawl.ReasonReset
			}
			detail += ": " + string(e.Status)
			if e.ReasonDetail != "" {
				detail += " (" + e.ReasonDetail + ")"
			}
		}
		dd.NextCrawlAfter = nil
		dd.ConsecutiveErrorCount, dd.ConsecutiveNetErrorCount, dd.NetErrorsSince, dd.ConsecutiveLoginWalls = 0, 0, nil, 0
		d.transition(dm, crawl.DomainPending, reason, detail)
	}
}
