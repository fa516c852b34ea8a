package job_test

import (
	"testing"
)

// The environment of an execution names its job directory; only that
// spool's in-progress/<agent>/<id> matches, for that id.
func TestIsExecutionEnv(t *testing.T) {
	t.Parallel()
	s := setup(t)
	base := "FARRO_JOB_DIR=" + s.Root + "/in-progress/"
	for entry, want := range map[string]bool{
		base + "w1/j1":     true,
		base + "w2/j1":     true,
		base + "w1/j10":    false,
		base + "w1/j1/sub": false,
		base + "/j1":       false,
		base + "j1":        false,
		"FARRO_JOB_DIR=/elsewhere/in-progress/w1/j1": false,
		"FARRO_JOB_ID=j1": false,
	} {
		if got := s.IsExecutionEnv([]byte(entry), "j1"); got != want {
			t.Errorf("IsExecutionEnv(%q) = %v, want %v", entry, got, want)
		}
	}
}
