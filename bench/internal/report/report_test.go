package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestRenderGoalVerdicts(t *testing.T) {
	t.Parallel()
	r := New()
	r.Cols = []string{"root", "journal"}
	r.AddGoal(Goal{Label: "b", Col: "journal", Target: ">= 1.0x", Known: true, Value: "0.50x"})
	r.AddGoal(Goal{Label: "a", Col: "root", Target: ">= 1.0x", Known: true, Value: "1.20x", Met: true})
	r.AddGoal(Goal{Label: "c", Col: "root", Target: "<= 64 MiB", Reason: "1M not run"})
	var buf bytes.Buffer
	r.Render(&buf)
	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "root" || f[0] == "journal") {
			lines = append(lines, strings.Join(f, " "))
		}
	}
	want := []string{
		"root a 1.20x (goal >= 1.0x) MET",
		"root c - (goal <= 64 MiB) NOT MEASURED (1M not run)",
		"journal b 0.50x (goal >= 1.0x) NOT MET",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("goal lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
