// Command testhandler is the exec handler of the end-to-end and crash
// tests. Each execution appends a start record and, unless it is killed,
// an end record to $FARRO_TEST_RECORDS/<job id>.jsonl, so the checker can
// prove from the handler's own view that no two executions of one job
// overlapped. It sleeps a few milliseconds (the prompt's sleep_ms, else
// 2-8 ms) and fails with probability fail_rate (default 0.2).
package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

type record struct {
	Event   string `json:"event"` // start or end
	NS      int64  `json:"ns"`    // unix nanoseconds
	PID     int    `json:"pid"`
	Attempt int    `json:"attempt"`
	Corr    string `json:"correlation_id"`
	Failed  bool   `json:"failed,omitempty"`
}

type prompt struct {
	SleepMS  *int     `json:"sleep_ms"`
	FailRate *float64 `json:"fail_rate"`
}

func main() {
	id := os.Getenv("FARRO_JOB_ID")
	dir := os.Getenv("FARRO_TEST_RECORDS")
	attempt, _ := strconv.Atoi(os.Getenv("FARRO_ATTEMPT"))
	if id == "" || dir == "" {
		fmt.Fprintln(os.Stderr, "testhandler: FARRO_JOB_ID and FARRO_TEST_RECORDS must be set")
		os.Exit(2)
	}
	var p prompt
	if err := json.NewDecoder(os.Stdin).Decode(&p); err != nil {
		fmt.Fprintln(os.Stderr, "testhandler: prompt:", err)
		os.Exit(2)
	}
	sleep := 2 + rand.IntN(7)
	if p.SleepMS != nil {
		sleep = *p.SleepMS
	}
	failRate := 0.2
	if p.FailRate != nil {
		failRate = *p.FailRate
	}
	rec := record{Event: "start", NS: time.Now().UnixNano(), PID: os.Getpid(), Attempt: attempt, Corr: os.Getenv("FARRO_CORRELATION_ID")}
	write(dir, id, rec)
	time.Sleep(time.Duration(sleep) * time.Millisecond)
	fail := rand.Float64() < failRate
	rec.Event, rec.NS, rec.Failed = "end", time.Now().UnixNano(), fail
	write(dir, id, rec)
	fmt.Println("done", id, attempt)
	if fail {
		fmt.Fprintln(os.Stderr, "simulated failure")
		os.Exit(1)
	}
}

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
