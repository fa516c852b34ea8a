// Command testhandler is the exec handler of the end-to-end and crash
// tests. Each execution appends a start record and, unless it is killed,
// an end record to $CRASHTEST_RECORDS/<job id>.jsonl, so the checker can
// prove from the handler's own view that no two executions of one job
// overlapped.
//
// Besides the timestamps, every execution holds an exclusive flock(2) on
// $CRASHTEST_RECORDS/<job id>.flock for as long as it lives; the kernel
// drops it when the process dies, however it dies. An execution that
// finds the lock taken records "overlap": true in its start record: two
// executions of one job were alive at the same instant, which no clock
// skew or missing end record can hide.
//
// The prompt says what to do: sleep sleep_ms (default 2-8 ms), or, with
// until_release, until the file $CRASHTEST_RECORDS/<job id>.release
// exists (at most sleep_ms, default 60 s); then fail with probability
// fail_rate (default 0.2). With in_child, the handler does all that in a
// child process of its own and waits for it, as a shell script running a
// command does.
//
// Every record also carries mono_ns, CLOCK_MONOTONIC (one clock for every
// process of the machine, which no wall-clock step moves). SIGTERM (what
// agentd sends a handler it stops) is trapped: the execution writes its
// end record (failed, signal "TERM") before it exits, so an execution
// without an end record is one that was SIGKILLed.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type record struct {
	Event   string `json:"event"` // start or end
	NS      int64  `json:"ns"`    // unix nanoseconds
	Mono    int64  `json:"mono_ns"`
	PID     int    `json:"pid"`
	PPID    int    `json:"ppid"` // the agentd running it
	Attempt int    `json:"attempt"`
	Corr    string `json:"correlation_id"`
	Overlap bool   `json:"overlap,omitempty"` // another execution held the job's flock
	// OverlapUS is how long the other execution kept holding it (µs,
	// waited for up to 5 s before this one went on).
	OverlapUS int64  `json:"overlap_us,omitempty"`
	Failed    bool   `json:"failed,omitempty"`
	Signal    string `json:"signal,omitempty"` // the end was written on this signal
}

type prompt struct {
	SleepMS      *int     `json:"sleep_ms"`
	InChild      bool     `json:"in_child"`
	FailRate     *float64 `json:"fail_rate"`
	UntilRelease bool     `json:"until_release"`
}

func main() {
	id := os.Getenv("FARRO_JOB_ID")
	dir := os.Getenv("CRASHTEST_RECORDS")
	attempt, _ := strconv.Atoi(os.Getenv("FARRO_ATTEMPT"))
	if id == "" || dir == "" {
		fmt.Fprintln(os.Stderr, "testhandler: FARRO_JOB_ID and CRASHTEST_RECORDS must be set")
		os.Exit(2)
	}
	raw, err := io.ReadAll(os.Stdin)
	var p prompt
	if err == nil {
		err = json.Unmarshal(raw, &p)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testhandler: prompt:", err)
		os.Exit(2)
	}
	if p.InChild && os.Getenv("FARRO_TEST_CHILD") == "" {
		child := exec.Command(os.Args[0])
		child.Stdin, child.Stdout, child.Stderr = bytes.NewReader(raw), os.Stdout, os.Stderr
		child.Env = append(os.Environ(), "FARRO_TEST_CHILD=1")
		err := child.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "testhandler:", err)
			os.Exit(2)
		}
		return
	}
	sleep := 2 + rand.IntN(7)
	if p.UntilRelease {
		sleep = 60_000
	}
	if p.SleepMS != nil {
		sleep = *p.SleepMS
	}
	failRate := 0.2
	if p.FailRate != nil {
		failRate = *p.FailRate
	}
	// SIGTERM is caught from here on (and acted on once the start record
	// is written): the execution then ends with an end record.
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	began, mono := time.Now(), monotonic()
	overlap := !takeFlock(filepath.Join(dir, id+".flock"))
	var overlapUS int64
	if overlap {
		// Measure how long the other execution lives on (a killed
		// process keeps its flock until it has fully exited).
		for time.Since(began) < 5*time.Second && !takeFlock(filepath.Join(dir, id+".flock")) {
			time.Sleep(200 * time.Microsecond)
		}
		overlapUS = time.Since(began).Microseconds()
	}
	rec := record{Event: "start", NS: began.UnixNano(), Mono: mono, PID: os.Getpid(), PPID: os.Getppid(), Attempt: attempt,
		Corr: os.Getenv("FARRO_CORRELATION_ID"), Overlap: overlap, OverlapUS: overlapUS}
	write(dir, id, rec)
	var ending sync.Mutex
	end := func(failed bool, sig string) {
		ending.Lock() // held until exit: one end record per execution
		rec.Event, rec.NS, rec.Mono, rec.Failed, rec.Overlap, rec.Signal = "end", time.Now().UnixNano(), monotonic(), failed, false, sig
		write(dir, id, rec)
	}
	go func() {
		<-terms
		end(true, "TERM")
		os.Exit(128 + int(syscall.SIGTERM))
	}()
	deadline := time.Now().Add(time.Duration(sleep) * time.Millisecond)
	if p.UntilRelease {
		release := filepath.Join(dir, id+".release")
		for time.Now().Before(deadline) {
			if _, err := os.Stat(release); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	} else {
		time.Sleep(time.Until(deadline))
	}
	fail := rand.Float64() < failRate
	end(fail, "")
	fmt.Println("done", id, attempt)
	if fail {
		fmt.Fprintln(os.Stderr, "simulated failure")
		os.Exit(1)
	}
}

// monotonic reads CLOCK_MONOTONIC in nanoseconds.
func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// takeFlock takes an exclusive flock on path for the life of the process
// (the descriptor is deliberately never closed). It reports false if
// another process holds it.
func takeFlock(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testhandler:", err)
		os.Exit(2)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testhandler: flock:", err)
		os.Exit(2)
	}
	flockFile = f
	return true
}

var flockFile *os.File // kept open (and locked) until the process exits

func write(dir, id string, r record) {
	b, _ := json.Marshal(r)
	f, err := os.OpenFile(filepath.Join(dir, id+".jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testhandler:", err)
		os.Exit(2)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, "testhandler:", err)
		os.Exit(2)
	}
}
