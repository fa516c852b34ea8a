package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

func readOut(t *testing.T, dir, stream string, attempt int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, job.OutputFile(stream, attempt)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A retry writes its own files: attempt 1's output is still there after
// attempt 2 ran.
func TestExecKeepsEachAttemptsOutput(t *testing.T) {
	t.Parallel()
	script := `echo "out of attempt $FARRO_ATTEMPT"; echo "err of attempt $FARRO_ATTEMPT" >&2; [ "$FARRO_ATTEMPT" -ge 2 ]`
	f := setup(t, Config{Handlers: map[string]Handler{"exec": &Exec{Command: []string{"/bin/sh", "-c", script}, OutputMax: DefaultOutputMax}}})
	f.submit(t, "r1", "exec", 0)
	f.waitState(t, "r1", job.Failed)
	if _, err := f.spool.Move("r1", job.Failed, job.Queued, "test", "retry", nil); err != nil {
		t.Fatal(err)
	}
	j := f.waitState(t, "r1", job.Succeeded)
	if j.Attempts != 2 {
		t.Fatalf("attempts %d, want 2", j.Attempts)
	}
	dir := f.spool.JobDir(job.Succeeded, "", "r1")
	for a := 1; a <= 2; a++ {
		if got, want := readOut(t, dir, job.Stdout, a), fmt.Sprintf("out of attempt %d\n", a); got != want {
			t.Errorf("stdout of attempt %d: %q, want %q", a, got, want)
		}
		if got, want := readOut(t, dir, job.Stderr, a), fmt.Sprintf("err of attempt %d\n", a); got != want {
			t.Errorf("stderr of attempt %d: %q, want %q", a, got, want)
		}
	}
	if got, err := job.OutputAttempts(dir); err != nil || fmt.Sprint(got) != "[1 2]" {
		t.Errorf("OutputAttempts = %v, %v; want [1 2]", got, err)
	}
}

var dropNote = regexp.MustCompile(`\[farro: output cap of (\d+) bytes \(stdout and stderr together, agentd --output-max\) reached: (\d+) bytes of (stdout|stderr) dropped\]\n$`)

// A handler writing 10 MiB under a 64 KiB cap is never blocked: it
// finishes, the files keep 64 KiB between them, and each file that lost
// bytes ends with a note that counts them exactly; job.json records the
// total.
func TestExecOutputCapDropsAndNotes(t *testing.T) {
	t.Parallel()
	const capBytes = 64 << 10
	// 10 MiB on stdout, 100 KiB on stderr, interleaved by two writers.
	script := `head -c 10485760 /dev/zero | tr '\0' o & head -c 102400 /dev/zero | tr '\0' e >&2; wait; echo done >&2`
	f := setup(t, Config{Handlers: map[string]Handler{"exec": &Exec{Command: []string{"/bin/sh", "-c", script}, OutputMax: capBytes}}})
	f.submit(t, "big", "exec", 0)
	j := f.waitState(t, "big", job.Succeeded)
	dir := f.spool.JobDir(job.Succeeded, "", "big")
	written := map[string]int64{job.Stdout: 10 << 20, job.Stderr: 100<<10 + int64(len("done\n"))}
	var kept, dropped int64
	for _, s := range []string{job.Stdout, job.Stderr} {
		out := readOut(t, dir, s, 1)
		m := dropNote.FindStringSubmatchIndex(out)
		if m == nil {
			if int64(len(out)) != written[s] {
				t.Errorf("%s: %d bytes and no note, want %d or a note", s, len(out), written[s])
			}
			kept += int64(len(out))
			continue
		}
		// The only newline a stream writes is its last byte, which a
		// stream that lost bytes never kept: the newline before the note
		// is the agent's.
		body, ok := strings.CutSuffix(out[:m[0]], "\n")
		if m[0] == 0 {
			ok = true // nothing of it kept: no line to end
		}
		if !ok || strings.Trim(body, "oedn") != "" {
			t.Errorf("%s: unexpected bytes before the note: %q", s, out[max(0, m[0]-20):m[0]])
		}
		n, _ := strconv.ParseInt(out[m[4]:m[5]], 10, 64)
		if c, _ := strconv.Atoi(out[m[2]:m[3]]); c != capBytes || out[m[6]:m[7]] != s {
			t.Errorf("%s: note %q", s, out[m[0]:])
		}
		got := int64(len(body))
		if got+n != written[s] {
			t.Errorf("%s: %d kept + %d dropped != %d written", s, got, n, written[s])
		}
		kept += got
		dropped += n
	}
	if kept != capBytes {
		t.Errorf("kept %d bytes in all, want the cap %d", kept, capBytes)
	}
	if dropped == 0 || j.OutputDropped != dropped {
		t.Errorf("job.json output_dropped %d, files say %d dropped", j.OutputDropped, dropped)
	}
}

// With no cap the handler writes straight into the files: nothing is
// dropped and job.json says nothing about it.
func TestExecOutputUnlimited(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{Handlers: map[string]Handler{"exec": &Exec{Command: []string{"/bin/sh", "-c", `head -c 200000 /dev/zero`}}}})
	f.submit(t, "u1", "exec", 0)
	j := f.waitState(t, "u1", job.Succeeded)
	if out := readOut(t, f.spool.JobDir(job.Succeeded, "", "u1"), job.Stdout, 1); len(out) != 200000 || j.OutputDropped != 0 {
		t.Errorf("kept %d bytes (want 200000), output_dropped %d", len(out), j.OutputDropped)
	}
}

// A FIFO planted where the attempt's output goes is refused at once: the
// job fails with a clear error instead of blocking its slot.
func TestExecOutputFIFORefused(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{Handlers: map[string]Handler{"exec": &Exec{Command: []string{"/bin/true"}, OutputMax: DefaultOutputMax}}})
	// Submit held, plant the FIFO, then release it to the agent.
	if _, err := f.spool.Submit(job.SubmitRequest{ID: "ff", Kind: "exec", Prompt: []byte(`{}`), Held: true}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(f.spool.JobDir(job.Held, "", "ff"), job.OutputFile(job.Stdout, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.spool.Move("ff", job.Held, job.Queued, "test", "release", nil); err != nil {
		t.Fatal(err)
	}
	j := f.waitState(t, "ff", job.Failed)
	if !strings.Contains(j.Error, "stdout.1.log is not a regular file") {
		t.Errorf("error %q does not name the planted file", j.Error)
	}
}

// A process the handler leaves behind holding its stdout does not keep
// the job running: the agent stops reading after outputDrain.
func TestExecOutputLeftoverChildDoesNotBlock(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{Handlers: map[string]Handler{"exec": &Exec{Command: []string{"/bin/sh", "-c", `sleep 8 & echo started`}, OutputMax: DefaultOutputMax}}})
	start := time.Now()
	f.submit(t, "bg", "exec", 0)
	f.waitState(t, "bg", job.Succeeded)
	if d := time.Since(start); d > outputDrain+3*time.Second {
		t.Errorf("job took %s with a leftover child holding its stdout", d)
	}
	if got := readOut(t, f.spool.JobDir(job.Succeeded, "", "bg"), job.Stdout, 1); got != "started\n" {
		t.Errorf("stdout %q", got)
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"0": 0, "512": 512, "64KiB": 64 << 10, "16MiB": 16 << 20, "1GiB": 1 << 30, "2G": 2 << 30, "10B": 10, "3KB": 3 << 10} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "16 MiB", "1.5GiB", "-1", "12PiB", "99999999999999999999"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}
