package job

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// Output streams: each attempt of a job writes its handler's output into
// its own pair of files in the job directory, stdout.<N>.log and
// stderr.<N>.log, N being the attempt (job.json's attempts while it
// runs), so that a retry never overwrites what an earlier attempt wrote
// and `ls` shows every attempt's output side by side.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// OutputFile is the name of stream's (Stdout or Stderr) file of attempt.
func OutputFile(stream string, attempt int) string {
	return stream + "." + strconv.Itoa(attempt) + ".log"
}

// ParseOutputFile tells whether name is an attempt's output file, and
// which stream and attempt. The legacy stdout.log and stderr.log (jobs
// run before per-attempt files) are attempt 0.
func ParseOutputFile(name string) (stream string, attempt int, ok bool) {
	for _, s := range []string{Stdout, Stderr} {
		if name == s+".log" {
			return s, 0, true
		}
		n, found := strings.CutPrefix(name, s+".")
		if !found {
			continue
		}
		n, found = strings.CutSuffix(n, ".log")
		if !found || n == "" || n[0] == '0' || len(n) > 9 {
			continue
		}
		a, err := strconv.Atoi(n)
		if err != nil || a <= 0 {
			continue
		}
		return s, a, true
	}
	return "", 0, false
}

// OutputAttempts lists the attempts that have output files in dir (either
// stream), ascending; 0 stands for the legacy stdout.log/stderr.log. Only
// regular files count (a symlink or FIFO planted there is not output).
func OutputAttempts(dir string) ([]int, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	var out []int
	for _, de := range des {
		if !de.Type().IsRegular() {
			continue
		}
		if _, a, ok := ParseOutputFile(de.Name()); ok && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out, nil
}

// OutputName is OutputFile, with attempt 0 naming the legacy files.
func OutputName(stream string, attempt int) string {
	if attempt == 0 {
		return stream + ".log"
	}
	return OutputFile(stream, attempt)
}
