package crash

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/fsq/fsqtest"
	"github.com/farro-dev/farro/pkg/job"
)

// slug makes a hostile kind fit a job ID or a domain name.
func slug(kind string) string { return strings.ReplaceAll(kind, " ", "-") }

// handMade builds a queued job directory in incoming/ by hand, as the
// submit transaction would have.
func handMade(t *testing.T, c *cluster, id string) string {
	t.Helper()
	dir := c.spool.JobDir(job.Queued, "", id)
	now := time.Now().UTC()
	j := &job.Job{SchemaVersion: job.SchemaVersion, ID: id, Kind: "noop", Status: job.Queued, CreatedAt: now, UpdatedAt: now}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, job.JobFile), j.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, job.PromptFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// quarantined reports whether corrupt/ holds an entry quarantined from
// a path ending in suffix.
func quarantined(c *cluster, suffix string) bool {
	notes, _ := filepath.Glob(filepath.Join(c.spoolDir, job.CorruptDir, "*.quarantine.json"))
	for _, n := range notes {
		b, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		var note struct {
			From string `json:"from"`
		}
		if json.Unmarshal(b, &note) == nil && strings.HasSuffix(note.From, suffix) {
			return true
		}
	}
	return false
}

// TestHostileEntries plants a FIFO, a socket, a directory, a 1 GiB sparse
// file and a symlink in each place a daemon reads — a queued job's
// job.json and prompt.json, a dead holder's lock owner file, a running
// job's control.json, a crawl's crawl.json and a domain file — plus a
// lock from another boot under another host name, with the real daemons
// running. Each is quarantined or recovered within seconds, every
// daemon keeps serving (ordinary jobs, one needing managerd's retry, run
// to the end), a fresh agentd becomes ready and works, and farroctl's
// readers answer.
func TestHostileEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemons; skipped with -short")
	}
	t.Parallel()
	c := newCluster(t, binaries(t))
	defer c.killAll()
	c.start("watchdogd", "watchdogd", "--interval", "100ms", "--lock-grace", "1s", "--crash-threshold", "5s", "--rescan", "1s")
	c.start("managerd", "managerd", "--backoff-base", "50ms", "--backoff-max", "200ms")
	// Everything is planted before the first agent starts: it would
	// claim the jobs this test holds on to.
	var running []string
	for _, k := range fsqtest.HostileKinds {
		// job.json and prompt.json of a queued job.
		fsqtest.PlantHostile(t, filepath.Join(handMade(t, c, "hj-"+slug(k)), job.JobFile), k)
		fsqtest.PlantHostile(t, filepath.Join(handMade(t, c, "hp-"+slug(k)), job.PromptFile), k)

		// The owner file of a lock whose holder is gone (claimed here,
		// then the owner replaced; no heartbeat will ever come).
		id := "ho-" + slug(k)
		c.ledger.attempt(id)
		if _, err := c.spool.Submit(job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		c.ledger.ack(id)
		if _, err := c.spool.Claim(id, job.Holder{Actor: "agentd/ghost", Agent: "ghost"}); err != nil {
			t.Fatal(err)
		}
		fsqtest.PlantHostile(t, filepath.Join(c.spool.LockPath(id), fsq.OwnerFile), k)

		// A running job's control.json (a handler can make one in its
		// own directory).
		id = "hc-" + slug(k)
		c.submit(id, `{"until_release":true,"sleep_ms":30000,"fail_rate":0}`)
		running = append(running, id)
	}
	// A lock of this machine's previous boot, under an old host name.
	c.submit("h-oldhost", `{"fail_rate":0}`, "--held")
	o := job.NewOwner("agentd/gone", "gone")
	o.Hostname, o.BootID, o.PID = "renamed-host", "00000000-0000-0000-0000-000000000000", 4242
	ob, _ := json.Marshal(o)
	if err := fsq.TryLock(c.spool.LockPath("h-oldhost"), ob); err != nil {
		t.Fatal(err)
	}
	a1 := c.startAgent("h1", "--concurrency", "6")
	// Crawl and domain files.
	for _, k := range fsqtest.HostileKinds {
		dir := filepath.Join(c.spoolDir, crawl.Dir, "hcrawl-"+slug(k))
		if err := os.MkdirAll(filepath.Join(dir, crawl.DomainsDir), 0o755); err != nil {
			t.Fatal(err)
		}
		fsqtest.PlantHostile(t, filepath.Join(dir, crawl.ConfigFile), k)
		fsqtest.PlantHostile(t, filepath.Join(dir, crawl.DomainsDir, crawl.DomainFile("example-"+slug(k)+".org")), k)
	}

	for i, id := range running {
		if !waitUntil(30*time.Second, func() bool { return c.starts(id) > 0 }) {
			t.Fatalf("%s never started", id)
		}
		k := fsqtest.HostileKinds[i]
		st, agent := c.state(id)
		if st != job.InProgress {
			t.Fatalf("%s is %s, want running", id, st)
		}
		fsqtest.PlantHostile(t, filepath.Join(c.spool.JobDir(job.InProgress, agent, id), job.ControlFile), k)
	}

	start := time.Now()
	for _, k := range fsqtest.HostileKinds {
		for _, id := range []string{"hj-" + slug(k), "hp-" + slug(k)} {
			if !waitUntil(15*time.Second, func() bool { return len(c.where(id)) == 0 && quarantined(c, "/"+id) }) {
				t.Errorf("%s: not quarantined (in %v)", id, c.where(id))
			}
		}
		id := "ho-" + slug(k)
		if !waitUntil(15*time.Second, func() bool {
			_, err := os.Lstat(c.spool.LockPath(id))
			st, _ := c.state(id)
			return os.IsNotExist(err) && st != job.InProgress
		}) {
			st, _ := c.state(id)
			t.Errorf("%s: lock with a %s owner not recovered (job %s)", id, k, st)
		}
		id = "hc-" + slug(k)
		if !waitUntil(15*time.Second, func() bool { return quarantined(c, id+"/"+job.ControlFile) }) {
			t.Errorf("%s: hostile control.json (%s) not quarantined", id, k)
		}
	}
	if !waitUntil(15*time.Second, func() bool {
		_, err := os.Lstat(c.spool.LockPath("h-oldhost"))
		return os.IsNotExist(err)
	}) {
		t.Errorf("the lock of a previous boot under another host name was not recovered")
	}
	t.Logf("hostile entries dealt with in %s", time.Since(start).Round(time.Millisecond))

	// Every daemon still serves: the running jobs finish once released,
	// new jobs run, and one that fails is retried by managerd.
	for _, id := range running {
		if err := os.WriteFile(filepath.Join(c.records, id+".release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var fresh []string
	for i := range 6 {
		id := fmt.Sprintf("after-%d", i)
		c.submit(id, `{"fail_rate":0}`)
		fresh = append(fresh, id)
	}
	c.submit("after-fails", `{"fail_rate":1}`, "--max-attempts", "2")
	// A fresh agentd becomes ready and works with every hostile entry
	// still about (the quarantined ones are in corrupt/, the crawl files
	// stay where they were planted).
	a1.stop(10 * time.Second)
	c.startAgent("h2")
	for i := range 4 {
		id := fmt.Sprintf("fresh-%d", i)
		c.submit(id, `{"fail_rate":0}`)
		fresh = append(fresh, id)
	}
	for _, id := range append(running, fresh...) {
		if !waitUntil(60*time.Second, func() bool { st, _ := c.state(id); return st == job.Succeeded }) {
			st, _ := c.state(id)
			t.Errorf("%s: %s, want succeeded", id, st)
		}
	}
	if !waitUntil(60*time.Second, func() bool { st, _ := c.state("after-fails"); return st == job.Killed }) {
		st, _ := c.state("after-fails")
		t.Errorf("after-fails: %s, want killed after managerd's retries", st)
	}
	// farroctl's readers answer (they never block on a FIFO).
	for _, args := range [][]string{{"ls"}, {"stats"}, {"fsck"}, {"domains"}, {"crawl", "ls"}, {"agents"}} {
		done := make(chan ctlResult, 1)
		go func() { done <- c.ctlOnce(args...) }()
		select {
		case r := <-done:
			if r.code == -1 {
				t.Errorf("farroctl %v: %s", args, r.stderr)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("farroctl %v blocked", args)
		}
	}
}
