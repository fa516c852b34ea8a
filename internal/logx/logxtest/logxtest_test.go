package logxtest

import "testing"

func TestDuplicateKey(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		`{"a":1,"b":{"a":2}}`: "",
		`{"a":1,"a":2}`:       "a",
		`not json`:            "",
	} {
		if got := DuplicateKey([]byte(line)); got != want {
			t.Errorf("DuplicateKey(%s) = %q, want %q", line, got, want)
		}
	}
}
