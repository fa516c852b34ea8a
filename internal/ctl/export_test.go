package ctl

import "testing"

// SetSelectedHook runs f between a filter's selection and its actions,
// for the test's duration.
func SetSelectedHook(t *testing.T, f func(ids []string)) {
	selectedHook = f
	t.Cleanup(func() { selectedHook = nil })
}
