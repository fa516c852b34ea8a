package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// On a PostgreSQL store the working directories are recycled: jobs run
// one after the other, with prompts each shorter than the last, each
// read exactly its own prompt on stdin; those that printed nothing left
// no directory behind (all of them ran in the pool's few directories),
// and the one that printed keeps its directory with its output.
func TestStoreRecyclesWorkingDirectories(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	seen := t.TempDir()
	st := newPGStore(t, local)
	var reqs []job.SubmitRequest
	for i := range 6 {
		p := `{"pad":"` + strings.Repeat("z", 400-60*i) + `"}`
		reqs = append(reqs, job.SubmitRequest{ID: "job-" + string(rune('a'+i)), Kind: "exec", Prompt: []byte(p)})
	}
	reqs = append(reqs, job.SubmitRequest{ID: "job-talks", Kind: "exec", Prompt: []byte(`{"say":1}`)})
	submit(t, st, reqs...)
	script := `cat > ` + seen + `/"$FARRO_JOB_ID"; if [ "$FARRO_JOB_ID" = job-talks ]; then echo hello; fi`
	startPG(t, st, local, script, Config{Concurrency: 1, Heartbeat: 100 * time.Millisecond}, nil)
	for _, r := range reqs {
		waitJob(t, st, r.ID, func(j *job.Job) bool { return j.Status == job.Succeeded })
	}
	agentDir := filepath.Join(local, "scratch", "w1")
	for _, r := range reqs {
		got, err := os.ReadFile(filepath.Join(seen, r.ID))
		if err != nil || string(got) != string(r.Prompt) {
			t.Errorf("%s: the handler read %q (%v), want its prompt %q", r.ID, got, err, r.Prompt)
		}
		_, err = os.Lstat(filepath.Join(agentDir, r.ID))
		if kept := err == nil; kept != (r.ID == "job-talks") {
			t.Errorf("%s: working directory kept %v (%v)", r.ID, kept, err)
		}
	}
	if out, err := os.ReadFile(filepath.Join(agentDir, "job-talks", job.OutputFile(job.Stdout, 1))); err != nil || string(out) != "hello\n" {
		t.Errorf("the kept output: %q %v", out, err)
	}
	// The commit that gives a directory back may run behind the next
	// claim: a few directories, never one per job.
	waitFor(t, func() bool {
		ents, err := os.ReadDir(filepath.Join(agentDir, ".pool"))
		return err == nil && len(ents) > 0 && len(ents) < len(reqs)-1
	}, func() string {
		ents, err := os.ReadDir(filepath.Join(agentDir, ".pool"))
		return fmt.Sprintf("the pool holds %d directories (%v), want 1 to %d", len(ents), err, len(reqs)-2)
	})
}
