package daemon

import (
	"errors"
	"fmt"
	"testing"
)

type codedErr struct{ code int }

func (e codedErr) Error() string { return "coded" }
func (e codedErr) ExitCode() int { return e.code }

// An error that carries an exit code (wrapped or not) decides the status;
// any other error is 1.
func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("plain"), 1},
		{codedErr{150}, 150},
		{fmt.Errorf("wrapped: %w", codedErr{150}), 150},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
