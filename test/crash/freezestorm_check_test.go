package crash

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestFreezeStormOverlapRule checks the checker's overlap rule on crafted
// handler records: an execution overlaps when it began before an earlier
// one of its job recorded its end (on the monotonic clock when both have
// it), or found the job's flock held; an earlier execution without an end
// record whose flock was free is proven dead.
func TestFreezeStormOverlapRule(t *testing.T) {
	dir := t.TempDir()
	records := map[string]string{
		// One after the other.
		"seq": `{"event":"start","ns":100,"mono_ns":10,"pid":1,"attempt":1}
{"event":"end","ns":200,"mono_ns":20,"pid":1,"attempt":1}
{"event":"start","ns":300,"mono_ns":30,"pid":2,"attempt":2}
{"event":"end","ns":400,"mono_ns":40,"pid":2,"attempt":2}
`,
		// The second began before the first ended (on SIGTERM).
		"late-end": `{"event":"start","ns":100,"mono_ns":10,"pid":1,"attempt":1}
{"event":"start","ns":150,"mono_ns":15,"pid":2,"attempt":2}
{"event":"end","ns":200,"mono_ns":20,"pid":1,"attempt":1,"failed":true,"signal":"TERM"}
{"event":"end","ns":400,"mono_ns":40,"pid":2,"attempt":2}
`,
		// SIGKILLed without an end record; the flock was free after it.
		"killed": `{"event":"start","ns":100,"mono_ns":10,"pid":1,"attempt":1}
{"event":"start","ns":300,"mono_ns":30,"pid":2,"attempt":2}
{"event":"end","ns":400,"mono_ns":40,"pid":2,"attempt":2}
`,
		// No end record, and the next one found the flock held.
		"killed-late": `{"event":"start","ns":100,"mono_ns":10,"pid":1,"attempt":1}
{"event":"start","ns":300,"mono_ns":30,"pid":2,"attempt":2,"overlap":true,"overlap_us":700}
{"event":"end","ns":400,"mono_ns":40,"pid":2,"attempt":2}
`,
		// The wall clock stepped back; the monotonic clock says in order.
		"clock-step": `{"event":"start","ns":100,"mono_ns":10,"pid":1,"attempt":1}
{"event":"end","ns":900,"mono_ns":20,"pid":1,"attempt":1}
{"event":"start","ns":300,"mono_ns":30,"pid":2,"attempt":2}
{"event":"end","ns":400,"mono_ns":40,"pid":2,"attempt":2}
`,
		// A long first one overlaps both later ones, the third not
		// adjacent to it.
		"long-first": `{"event":"start","ns":100,"mono_ns":10,"pid":1,"attempt":1}
{"event":"start","ns":200,"mono_ns":20,"pid":2,"attempt":2}
{"event":"end","ns":300,"mono_ns":30,"pid":2,"attempt":2}
{"event":"start","ns":500,"mono_ns":50,"pid":3,"attempt":3}
{"event":"end","ns":600,"mono_ns":60,"pid":3,"attempt":3}
{"event":"end","ns":1000,"mono_ns":100,"pid":1,"attempt":1}
`,
	}
	want := map[string][]int{"seq": nil, "late-end": {1}, "killed": nil, "killed-late": {1}, "clock-step": nil, "long-first": {1, 2}}
	for id, recs := range records {
		if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), []byte(recs), 0o644); err != nil {
			t.Fatal(err)
		}
		execs, err := loadExecutions(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		got := overlappedRuns(execs)
		if !reflect.DeepEqual(got, want[id]) {
			t.Errorf("%s: overlapping executions %v, want %v", id, got, want[id])
		}
		if msg := overlapping(execs); (msg != "") != (len(want[id]) > 0) {
			t.Errorf("%s: overlapping says %q", id, msg)
		}
		var s runStats
		s.count(execs)
		if s.overlapRuns != len(want[id]) || s.executions != len(execs) || s.reruns != len(execs)-1 {
			t.Errorf("%s: stats %+v for %d executions", id, s, len(execs))
		}
	}
}
