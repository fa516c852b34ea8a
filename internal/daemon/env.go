package daemon

import (
	"fmt"
	"slices"
	"strings"

	"github.com/farro-dev/farro/pkg/fsq"
)

// FlagEnv lists every FARRO_* variable that sets a flag of a farro binary
// (agentd, managerd, watchdogd, farroctl), with the binaries that read it.
// One environment file (/etc/farro/farro.env) is shared by all of them,
// so a name is unknown only when no binary knows it. test/ops checks this
// table against the ENVIRONMENT section of every binary's man page (which
// is generated from its flags), so that it cannot drift.
var FlagEnv = map[string][]string{
	"FARRO_SPOOL":                {"agentd", "managerd", "watchdogd", "farroctl"},
	"FARRO_STORE":                {"agentd", "managerd", "watchdogd", "farroctl"},
	"FARRO_LOG_LEVEL":            {"agentd", "managerd", "watchdogd"},
	"FARRO_METRICS_ADDR":         {"agentd", "managerd", "watchdogd"},
	"FARRO_METRICS_ALLOW_REMOTE": {"agentd", "managerd", "watchdogd"},
	"FARRO_RESCAN":               {"agentd", "managerd", "watchdogd"},
	"FARRO_NO_NOTIFY":            {"agentd", "managerd", "watchdogd"},
	"FARRO_AGENT_ID":             {"agentd"},
	"FARRO_EXEC":                 {"agentd"},
	"FARRO_CONCURRENCY":          {"agentd"},
	"FARRO_TIMEOUT":              {"agentd"},
	"FARRO_HEARTBEAT":            {"agentd"},
	"FARRO_DRAIN_TIMEOUT":        {"agentd"},
	"FARRO_KILL_GRACE":           {"agentd"},
	"FARRO_KINDS":                {"agentd"},
	"FARRO_OUTPUT_MAX":           {"agentd"},
	"FARRO_LEASE":                {"agentd"},
	"FARRO_MAX_ATTEMPTS":         {"managerd"},
	"FARRO_BACKOFF_BASE":         {"managerd"},
	"FARRO_BACKOFF_MAX":          {"managerd"},
	"FARRO_RETENTION":            {"managerd"},
	"FARRO_EVENTS_RETENTION":     {"managerd"},
	"FARRO_DOMAIN_CACHE":         {"managerd"},
	"FARRO_TMP_MAX_AGE":          {"managerd"},
	"FARRO_METRICS_RESCAN":       {"managerd"},
	"FARRO_FRONTIER":             {"managerd"},
	"FARRO_INTERVAL":             {"watchdogd"},
	"FARRO_CRASH_THRESHOLD":      {"watchdogd"},
	"FARRO_LOCK_GRACE":           {"watchdogd"},
	"FARRO_LEASE_GRACE":          {"watchdogd"},
	"FARRO_SCRATCH_RETENTION":    {"watchdogd"},
}

// OtherEnv lists the FARRO_* names that are farro's without setting a
// flag: the environment agentd gives a job's handler (inherited by what
// the handler starts, a daemon included), farro-pipeline.service's
// command line (deploy/systemd). The crash-test hooks of pkg/fsq
// (fsq.CrashEnv) are known only to binaries built with the crash-point
// tag: a release binary holds no trace of them.
var OtherEnv = []string{
	"FARRO_JOB_ID", "FARRO_JOB_DIR", "FARRO_ATTEMPT", "FARRO_CORRELATION_ID", "FARRO_CLAIM_TOKEN",
	"FARRO_PIPELINE_ARGS",
}

// KnownEnv reports whether name is a FARRO_* variable of some farro binary.
func KnownEnv(name string) bool {
	_, ok := FlagEnv[name]
	return ok || slices.Contains(OtherEnv, name) || slices.Contains(fsq.CrashEnv, name)
}

// UnknownVar is a FARRO_* variable of the environment that no farro
// binary reads, and the known name closest to it, if one is close.
type UnknownVar struct {
	Name       string
	Suggestion string
}

// Message is the warning about u.
func (u UnknownVar) Message() string {
	msg := fmt.Sprintf("unknown variable %s in the environment, ignored", u.Name)
	if u.Suggestion != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", u.Suggestion)
	}
	return msg
}

// UnknownEnv returns the unknown FARRO_* variables of environ (KEY=value
// entries, as os.Environ), in order, each once. The prefix is matched
// without regard to case (farro_spool is a mistake too).
func UnknownEnv(environ []string) []UnknownVar {
	var known []string
	for name := range FlagEnv {
		known = append(known, name)
	}
	known = append(append(known, OtherEnv...), fsq.CrashEnv...)
	slices.Sort(known)
	var out []UnknownVar
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(strings.ToUpper(name), "FARRO_") || KnownEnv(name) || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, UnknownVar{Name: name, Suggestion: closest(strings.ToUpper(name), known)})
	}
	return out
}

// closest returns the candidate nearest to name by edit distance, if it
// is near enough to be a typo: at most 2 edits (1 for names of 4
// characters or fewer); ties go to the first in candidates.
func closest(name string, candidates []string) string {
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of adjacent
// characters count one each.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j]: distance between ra[:i] and rb[:j].
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
