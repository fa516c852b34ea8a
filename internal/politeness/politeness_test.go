package politeness

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sends runs n requests through domain's gate from n goroutines (each
// turn its own file descriptors) and returns when each was "sent".
func sends(t *testing.T, g *Gates, domain string, n int, ask Ask) []time.Time {
	t.Helper()
	var mu sync.Mutex
	var at []time.Time
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tn, err := g.Wait(context.Background(), domain, ask)
			if err != nil {
				t.Error(err)
				return
			}
			now := time.Now()
			tn.Sent(now)
			mu.Lock()
			at = append(at, now)
			mu.Unlock()
			tn.Done()
		}()
	}
	wg.Wait()
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	return at
}

func TestIntervalSpacesEveryRequest(t *testing.T) {
	t.Parallel()
	g := At(t.TempDir())
	const interval = 30 * time.Millisecond
	at := sends(t, g, "example.org", 6, Ask{Interval: interval, MaxInFlight: 8})
	for i := 1; i < len(at); i++ {
		if d := at[i].Sub(at[i-1]); d < interval {
			t.Errorf("requests %d and %d %s apart, want at least %s", i-1, i, d, interval)
		}
	}
	// Another domain has its own gate: no wait.
	t0 := time.Now()
	sends(t, g, "other.example", 1, Ask{Interval: time.Hour})
	if d := time.Since(t0); d > time.Second {
		t.Errorf("a fresh domain waited %s", d)
	}
}

// The larger of two parties' intervals holds between their requests.
func TestLargerIntervalHolds(t *testing.T) {
	t.Parallel()
	g := At(t.TempDir())
	slow, fast := Ask{Interval: 150 * time.Millisecond}, Ask{Interval: 10 * time.Millisecond}
	a := sends(t, g, "d.test", 1, slow)[0]
	b := sends(t, g, "d.test", 1, fast)[0]
	c := sends(t, g, "d.test", 1, slow)[0]
	if b.Sub(a) < slow.Interval {
		t.Errorf("a 10ms request %s after a 150ms one", b.Sub(a))
	}
	if c.Sub(b) < slow.Interval {
		t.Errorf("a 150ms request %s after a 10ms one", c.Sub(b))
	}
	// A party asking no interval still keeps the others'.
	d := sends(t, g, "d.test", 1, Ask{})[0]
	if d.Sub(c) < slow.Interval {
		t.Errorf("a request asking no interval %s after a 150ms one", d.Sub(c))
	}
}

// Between Wait and Sent the turn holds the gate: another waits.
func TestTurnHoldsGateUntilSent(t *testing.T) {
	t.Parallel()
	g := At(t.TempDir())
	const interval = 20 * time.Millisecond
	tn, err := g.Wait(context.Background(), "h.test", Ask{Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*interval)
	if _, err := g.Wait(ctx, "h.test", Ask{Interval: interval}); err == nil {
		t.Error("a second request passed a gate held by an unsent one")
	}
	cancel()
	time.Sleep(2 * interval) // a slow write: the request goes out late
	sentAt := time.Now()
	tn.Sent(sentAt)
	tn.Done()
	tn2, err := g.Wait(context.Background(), "h.test", Ask{Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	if now := time.Now(); now.Before(sentAt.Add(interval)) {
		t.Errorf("passed at %s, before the late send + interval (%s)", now.Format(time.StampMicro), sentAt.Add(interval).Format(time.StampMicro))
	}
	tn2.Done()
}

func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	g := At(t.TempDir())
	wide := Ask{MaxInFlight: 3}
	a, err := g.Wait(context.Background(), "f.test", wide)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Wait(context.Background(), "f.test", wide)
	if err != nil {
		t.Fatal(err)
	}
	// Two under way: a party allowing one waits, one allowing three not.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Millisecond)
	_, err = g.Wait(ctx, "f.test", Ask{MaxInFlight: 1})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a cap-1 request with 2 under way: %v, want it to wait", err)
	}
	c, err := g.Wait(context.Background(), "f.test", wide)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Millisecond)
	_, err = g.Wait(ctx, "f.test", wide)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a fourth request with cap 3: %v, want it to wait", err)
	}
	a.Done()
	b.Done()
	// One under way (c): a cap-2 request passes once b is done.
	d, err := g.Wait(context.Background(), "f.test", Ask{MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	d.Done()
	c.Done()
	one, err := g.Wait(context.Background(), "f.test", Ask{MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	one.Done()
}

// TestHelperProcess is the other process of the tests below: it takes a
// turn, says so, and holds it until killed.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv("POLITENESS_HELPER_DIR")
	if dir == "" {
		return
	}
	tn, err := At(dir).Wait(context.Background(), "k.test", Ask{Interval: 100 * time.Millisecond, MaxInFlight: 1})
	if err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		os.Exit(1)
	}
	if os.Getenv("POLITENESS_HELPER_SENT") != "" {
		tn.Sent(time.Now())
	}
	os.Stdout.WriteString("passed\n")
	time.Sleep(time.Minute) // killed
	os.Exit(0)
}

// helper starts a process holding a turn of k.test and waits for it to
// say it passed.
func helper(t *testing.T, dir string, sent bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "POLITENESS_HELPER_DIR="+dir)
	if sent {
		cmd.Env = append(cmd.Env, "POLITENESS_HELPER_SENT=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if strings.TrimSpace(s) != "passed" {
			t.Fatalf("helper: %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("helper did not pass the gate in 5s")
	}
	return cmd
}

// A process SIGKILLed between passing and sending: the gate is held while
// it lives, and once it is dead the next request waits an interval from
// when it finds the gate (the dead one may have sent just before dying),
// not forever.
func TestHolderKilledBeforeSending(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := helper(t, dir, false)
	g := At(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	_, err := g.Wait(ctx, "k.test", Ask{Interval: 100 * time.Millisecond})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("passed a gate another process holds: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t0 := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tn, err := g.Wait(ctx, "k.test", Ask{Interval: 10 * time.Millisecond, MaxInFlight: 1})
	if err != nil {
		t.Fatalf("after its holder died: %v", err)
	}
	tn.Done()
	if d := time.Since(t0); d < 100*time.Millisecond {
		t.Errorf("passed %s after the holder died unsent, want its interval (100ms)", d)
	}
}

// A process SIGKILLed with a request under way (sent, not done): its slot
// is held while it lives, free once it is dead.
func TestInFlightOfKilledProcessFreed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := helper(t, dir, true)
	g := At(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := g.Wait(ctx, "k.test", Ask{MaxInFlight: 1})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("passed with another process's request under way (cap 1): %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tn, err := g.Wait(ctx, "k.test", Ask{MaxInFlight: 1})
	if err != nil {
		t.Fatalf("the dead process's slot still counts: %v", err)
	}
	tn.Done()
}

// Hostile files at a gate's path are moved aside, never read whole, never
// followed, never blocked on; a clear error when they cannot be.
func TestHostileGateFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	g := At(dir)
	var mu sync.Mutex
	var told []string
	g.OnBadFile = func(e *BadFileError) {
		mu.Lock()
		told = append(told, e.Error())
		mu.Unlock()
	}
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := g.Path("big.test")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 1<<30); err != nil {
		t.Fatal(err)
	}
	setup := map[string]func(p string) error{
		"fifo.test":    func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"link.test":    func(p string) error { return os.Symlink(outside, p) },
		"dir.test":     func(p string) error { return os.Mkdir(p, 0o755) },
		"garbage.test": func(p string) error { return os.WriteFile(p, []byte("not a gate\n"), 0o644) },
		"big.test":     func(string) error { return nil },
	}
	for d, mk := range setup {
		if err := mk(g.Path(d)); err != nil {
			t.Fatal(err)
		}
	}
	// A FIFO as a slot file, too.
	if err := syscall.Mkfifo(g.slotPath("slotfifo.test", 0), 0o644); err != nil {
		t.Fatal(err)
	}
	setup["slotfifo.test"] = nil
	for d := range setup {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		tn, err := g.Wait(ctx, d, Ask{Interval: time.Millisecond, MaxInFlight: 1})
		cancel()
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		tn.Sent(time.Now())
		tn.Done()
		fi, err := os.Lstat(g.Path(d))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != recSize {
			t.Errorf("%s: the gate is not a new record: %v %v", d, fi, err)
		}
		aside, _ := filepath.Glob(g.Path(d) + "@bad-*")
		if len(aside) == 0 {
			aside, _ = filepath.Glob(g.slotPath(d, 0) + "@bad-*")
		}
		if len(aside) != 1 {
			t.Errorf("%s: moved aside: %v, want one file", d, aside)
		}
	}
	if len(told) != len(setup) {
		t.Errorf("OnBadFile told of %d files, want %d: %q", len(told), len(setup), told)
	}
	for _, m := range told {
		if strings.Contains(m, "\n") || !strings.Contains(m, "moved to") {
			t.Errorf("bad file report %q: want one line saying where it went", m)
		}
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep me" {
		t.Errorf("the symlink's target changed: %q %v", b, err)
	}
	// The gates directory itself unusable: a one-line error.
	bad := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(bad, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := At(bad).Wait(context.Background(), "x.test", Ask{Interval: time.Millisecond})
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("gates under a file: %v", err)
	}
}

// A clock stepped back after a request was recorded makes the record's
// times lie in the future: the wait is still at most an interval (a
// hold: at most MaxHold), not the size of the step.
func TestClockStepBackWaitsAtMostAnInterval(t *testing.T) {
	t.Parallel()
	g := At(t.TempDir())
	g.maxHold = 150 * time.Millisecond
	const interval = 80 * time.Millisecond
	f, r, err := g.lockRecord(context.Background(), "c.test")
	if err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour) // written before a 1 h step back
	r.last, r.next = future, future.Add(interval)
	if err := writeRecord(f, &r); err != nil {
		t.Fatal(err)
	}
	unlock(f)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tn, err := g.Wait(ctx, "c.test", Ask{Interval: interval})
	if err != nil {
		t.Fatalf("after a clock step back: %v", err)
	}
	tn.Sent(time.Now())
	tn.Done()
	if d := time.Since(t0); d < interval || d > interval+time.Second {
		t.Errorf("waited %s after a 1h step back, want about the interval %s", d, interval)
	}
	// A hold recorded an hour ahead ends within maxHold.
	f, r, err = g.lockRecord(context.Background(), "c.test")
	if err != nil {
		t.Fatal(err)
	}
	r.hold = time.Now().Add(time.Hour)
	_ = writeRecord(f, &r)
	unlock(f)
	t0 = time.Now()
	tn, err = g.Wait(ctx, "c.test", Ask{})
	if err != nil {
		t.Fatal(err)
	}
	tn.Done()
	if d := time.Since(t0); d < g.maxHold-10*time.Millisecond || d > g.maxHold+time.Second {
		t.Errorf("waited %s for a hold an hour ahead, want about %s", d, g.maxHold)
	}
}

func TestHoldUntil(t *testing.T) {
	t.Parallel()
	g := At(t.TempDir())
	if err := g.HoldUntil("r.test", time.Now().Add(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	tn, err := g.Wait(context.Background(), "r.test", Ask{})
	if err != nil {
		t.Fatal(err)
	}
	tn.Done()
	if d := time.Since(t0); d < 90*time.Millisecond {
		t.Errorf("held gate passed after %s, want about 100ms", d)
	}
	// Resend keeps the slot and waits the interval again.
	tn, err = g.Wait(context.Background(), "r.test", Ask{Interval: 50 * time.Millisecond, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	tn.Sent(first)
	if err := tn.Resend(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(first); d < 50*time.Millisecond {
		t.Errorf("a resend %s after the first send, want the interval", d)
	}
	tn.Sent(time.Now())
	tn.Done()
}

func TestFileName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"example.org": "example.org", "..": "%2E.", "": "%", "a/b": "a%2Fb", "x@0": "x%400", "Ab": "%41b",
	} {
		if got := FileName(in); got != want {
			t.Errorf("FileName(%q) = %q, want %q", in, got, want)
		}
	}
}
