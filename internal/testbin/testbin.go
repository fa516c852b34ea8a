// Package testbin builds the project's binaries for end-to-end tests, which
// run the real daemons as separate processes.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Root is the module's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Build runs `go build flags... -o DIR/ pkgs...` from the module root into a
// new temporary directory named after prefix, and returns that directory;
// the caller removes it. Package patterns are relative to the root, e.g.
// "./cmd/...". The binaries are built without -race: they are the product
// under test, not the test.
func Build(prefix string, flags []string, pkgs ...string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	args := append(append([]string{"build"}, flags...), append([]string{"-o", dir + "/"}, pkgs...)...)
	cmd := exec.Command("go", args...)
	cmd.Dir = Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return dir, nil
}

// Set is a set of binaries built once per test process, on first use.
type Set struct {
	Prefix string   // temp directory name prefix
	Flags  []string // extra go build flags, e.g. "-tags", "x"
	Pkgs   []string // package patterns relative to the module root

	once sync.Once
	dir  string
	err  error
}

// Dir builds the set on first use and returns the directory holding the
// binaries; a build failure fails t.
func (s *Set) Dir(t testing.TB) string {
	t.Helper()
	s.once.Do(func() { s.dir, s.err = Build(s.Prefix, s.Flags, s.Pkgs...) })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.dir
}

// Remove deletes the binaries, if they were built (call it from TestMain).
func (s *Set) Remove() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
