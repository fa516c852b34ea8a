package job

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOutputFileNames(t *testing.T) {
	t.Parallel()
	if got := OutputFile(Stdout, 3); got != "stdout.3.log" {
		t.Errorf("OutputFile = %q", got)
	}
	for name, want := range map[string]string{
		"stdout.1.log": "stdout 1", "stderr.12.log": "stderr 12", "stdout.log": "stdout 0", "stderr.log": "stderr 0",
		"stdout.0.log": "-", "stdout.01.log": "-", "stdout.-1.log": "-", "stdout.x.log": "-", "stdout..log": "-",
		"stdout.1.log.tmp": "-", ".stdout.1.log": "-", "stdin.1.log": "-", "stdout.1234567890.log": "-",
	} {
		s, a, ok := ParseOutputFile(name)
		got := "-"
		if ok {
			got = fmt.Sprintf("%s %d", s, a)
		}
		if got != want {
			t.Errorf("ParseOutputFile(%q) = %s, want %s", name, got, want)
		}
	}
}

func TestOutputAttemptsListsRegularFilesOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []string{"stdout.10.log", "stderr.2.log", "stdout.2.log", "stderr.log", "job.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "stdout.7.log")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "stderr.8.log"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := OutputAttempts(dir)
	if err != nil || fmt.Sprint(got) != "[0 2 10]" {
		t.Errorf("OutputAttempts = %v, %v; want [0 2 10]", got, err)
	}
}
