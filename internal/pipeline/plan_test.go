package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/source"
)

func src(t *testing.T, name, url string, next *time.Time) *source.Source {
	t.Helper()
	s := source.New(name, url)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	s.NextCheckAfter = next
	return s
}

// TestPlanSeedExample is seed 003's domain fairness example, verbatim.
func TestPlanSeedExample(t *testing.T) {
	now := time.Now()
	var srcs []*source.Source
	for _, n := range []string{"page1", "page2", "page3", "page4"} {
		srcs = append(srcs, src(t, "example-"+n, "https://example.com/"+n, nil))
	}
	srcs = append(srcs, src(t, "other-doc1", "https://other.org/doc1", nil), src(t, "other-doc2", "https://other.org/doc2", nil),
		src(t, "third-article1", "https://third.net/article1", nil))
	later := now.Add(time.Hour)
	srcs = append(srcs, src(t, "notdue", "https://example.com/x", &later))
	p := MakePlan(srcs, Politeness{MaxSources: 5, MaxPerDomain: 2, MinDomainInterval: 2 * time.Second}, now)
	var got []string
	for _, q := range p.Queue {
		got = append(got, q.Source.Name)
	}
	if g := strings.Join(got, " "); g != "example-page1 other-doc1 third-article1 example-page2 other-doc2" {
		t.Errorf("queue %s", g)
	}
	if q := p.Queue[3]; q.Slot != 1 || !q.NotBefore.Equal(now.Add(2*time.Second)) {
		t.Errorf("second check of example.com: slot %d not before %s", q.Slot, q.NotBefore.Sub(now))
	}
	var left []string
	for _, s := range p.Left {
		left = append(left, s.Name)
	}
	if g := strings.Join(left, " "); g != "example-page3 example-page4" {
		t.Errorf("left %s", g)
	}
	if len(p.NotDue) != 1 {
		t.Errorf("not due %d", len(p.NotDue))
	}
}

// TestPlanMostOverdueFirst: within and across domains the most overdue
// go first; no caps takes everything due.
func TestPlanMostOverdueFirst(t *testing.T) {
	now := time.Now()
	t1, t2, t3 := now.Add(-3*time.Hour), now.Add(-2*time.Hour), now.Add(-time.Hour)
	srcs := []*source.Source{
		src(t, "b-new", "https://b.org/1", &t3), src(t, "a-mid", "https://a.org/1", &t2),
		src(t, "b-old", "https://b.org/2", &t1), src(t, "a-never", "https://a.org/2", nil),
	}
	p := MakePlan(srcs, Politeness{}, now)
	var got []string
	for _, q := range p.Queue {
		got = append(got, q.Source.Name)
	}
	if g := strings.Join(got, " "); g != "a-never b-old a-mid b-new" {
		t.Errorf("queue %s", g)
	}
	if len(p.Left) != 0 {
		t.Errorf("left %d", len(p.Left))
	}
}

func TestNormalizeBody(t *testing.T) {
	a := NormalizeBody([]byte("  <p>Hello\r\n\t  world</p>\n\n"))
	b := NormalizeBody([]byte("<p>Hello world</p>"))
	if string(a) != string(b) {
		t.Errorf("%q != %q", a, b)
	}
	if string(NormalizeBody([]byte("<p>Hello  World</p>"))) == string(b) {
		t.Error("case change not seen")
	}
}
