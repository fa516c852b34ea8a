package job

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The hand-written ID, kind and temp-name checks accept exactly what
// their patterns accept: compared on edge cases and random strings drawn
// from an alphabet around the allowed one.
func TestNameChecksMatchTheirPatterns(t *testing.T) {
	t.Parallel()
	id := regexp.MustCompile(IDPattern)
	kind := regexp.MustCompile(KindPattern)
	temp := regexp.MustCompile(`^\.(job\.json|control\.json)-?[0-9]+$`)
	alphabet := "aZ09._-/ \x00é.jobsncrtl"
	cases := []string{"", "a", ".a", "-a", "A", strings.Repeat("a", 64), strings.Repeat("a", 65),
		strings.Repeat("b", 128), strings.Repeat("b", 129), ".job.json", ".job.json1", ".job.json-", ".job.json-12",
		".control.json007", ".job.jsonx1", "x.job.json1", "..", "a/b"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := r.IntN(140)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
		if n > 2 && r.IntN(4) == 0 {
			cases = append(cases, ".job.json"+string(b[:n%5]))
		}
	}
	for _, s := range cases {
		if got, want := matchName(s, 128, isAlnum, isIDByte), id.MatchString(s); got != want {
			t.Fatalf("ID %q: %v, pattern says %v", s, got, want)
		}
		if got, want := ValidKind(s), kind.MatchString(s); got != want {
			t.Fatalf("kind %q: %v, pattern says %v", s, got, want)
		}
		if got, want := isWriteTemp(s), temp.MatchString(s); got != want {
			t.Fatalf("temp %q: %v, pattern says %v", s, got, want)
		}
	}
}
