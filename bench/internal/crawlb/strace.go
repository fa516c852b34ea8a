package crawlb

import (
	"sort"
	"strconv"
	"strings"
)

// StraceSummary is the table strace -c prints.
type StraceSummary []StraceRow

// StraceRow is one syscall of it.
type StraceRow struct {
	Name    string
	PctTime float64
	Seconds float64 // wall time in the call, all threads (strace -w)
	Calls   int64
}

// ParseStrace reads strace -c output.
func ParseStrace(s string) StraceSummary {
	var out StraceSummary
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		// % time  seconds  usecs/call  calls  [errors]  syscall
		if len(f) < 5 || f[len(f)-1] == "total" || f[len(f)-1] == "syscall" {
			continue
		}
		pct, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		secs, _ := strconv.ParseFloat(f[1], 64)
		calls, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, StraceRow{Name: f[len(f)-1], PctTime: pct, Seconds: secs, Calls: calls})
	}
	return out
}

// Calls of one syscall.
func (s StraceSummary) Calls(name string) int64 {
	for _, r := range s {
		if r.Name == name {
			return r.Calls
		}
	}
	return 0
}

// Secs is the wall time spent in one syscall, all threads added up.
func (s StraceSummary) Secs(name string) float64 {
	for _, r := range s {
		if r.Name == name {
			return r.Seconds
		}
	}
	return 0
}

// Total calls.
func (s StraceSummary) Total() int64 {
	var n int64
	for _, r := range s {
		n += r.Calls
	}
	return n
}

// ByTime sorts the rows by share of time, largest first.
func (s StraceSummary) ByTime() StraceSummary {
	out := append(StraceSummary(nil), s...)
	sort.Slice(out, func(i, j int) bool { return out[i].PctTime > out[j].PctTime })
	return out
}
