package main

import (
	"io"
	"testing"
)

// TestVersionAllocatesLittle bounds what farroctl itself allocates for
// --version (building its command tree and running it), which every
// command pays at every start; with TestFarroctlInitIsSmall (the package
// initialisations) it guards farroctl's start without timing it. It was
// 1,421 allocations when every flag of every command went through a
// regular expression; 766 after.
func TestVersionAllocatesLittle(t *testing.T) {
	const max = 1000
	var code int
	n := testing.AllocsPerRun(10, func() { code = run([]string{"farroctl", "--version"}, nil, io.Discard, io.Discard) })
	if code != 0 {
		t.Fatalf("farroctl --version: exit %d", code)
	}
	if n > max {
		t.Errorf("farroctl --version allocates %v times; at most %d", n, max)
	}
}
