//go:build !farro_crashpoints

package fsq

// CrashPointsEnabled reports whether this binary was built with the
// farro_crashpoints build tag. Release builds never are.
const CrashPointsEnabled = false

// CrashEnv lists the environment variables the crash-point build reads
// (crashpoint_on.go); a release build reads none, and names none.
var CrashEnv []string

// CrashPoint names a point between two filesystem steps of a transaction
// (e.g. "commit/rename:before", qualified by the target state as
// "commit@succeeded/rename:before"). The crash-simulation harness
// (test/crash) builds the daemons with -tags farro_crashpoints, where a
// process whose FARRO_CRASH_POINT names a point SIGKILLs itself there.
//
// In release builds (this file) it does nothing, and the compiler inlines
// the empty call away: no crash can be injected into a release binary.
func CrashPoint(name string, qual ...string) {}

// injectedOverflow is the harness's simulated fsnotify queue overflow; in
// release builds no event is ever dropped.
func injectedOverflow() (drop, overflow bool) { return false, false }
