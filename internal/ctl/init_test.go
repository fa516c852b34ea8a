package ctl_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// A mistyped --spool is refused by submit (nothing is created, the error
// names farroctl init) until `farroctl init` makes the spool.
func TestSubmitRefusesWhatIsNotASpool(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	other := filepath.Join(root, "home")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(root, "spoool"), other} {
		var out, errOut bytes.Buffer
		c := &ctl.Ctl{Root: dir, Stdin: strings.NewReader(`{"n":1}`), Stdout: &out, Stderr: &errOut}
		err := c.Submit(ctl.SubmitOptions{Kind: "noop"})
		if err == nil || !strings.Contains(err.Error(), "farroctl init") {
			t.Fatalf("submit into %s = %v, want a refusal that names farroctl init", dir, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "incoming")); err == nil {
			t.Fatalf("submit into %s made a spool", dir)
		}
		if out.Len() != 0 {
			t.Fatalf("submit into %s printed %q", dir, out.String())
		}
		// init makes a spool of a missing directory; one that holds
		// other things stays refused.
		c.Stdin = strings.NewReader(`{"n":1}`)
		initErr := c.Init("")
		if dir == other {
			if initErr == nil {
				t.Fatalf("init of %s (not empty, not a spool) succeeded", dir)
			}
			continue
		}
		if initErr != nil {
			t.Fatalf("init %s: %v", dir, initErr)
		}
		if ok, _ := job.IsSpool(dir); !ok {
			t.Fatalf("after init %s is not a spool", dir)
		}
		out.Reset()
		if err := c.Submit(ctl.SubmitOptions{Kind: "noop"}); err != nil {
			t.Fatalf("submit after init: %v", err)
		}
		if strings.TrimSpace(out.String()) == "" {
			t.Fatal("submit after init printed no ID")
		}
	}
}
