package crawl

import (
	"strings"
	"testing"
)

func TestBoundReferrer(t *testing.T) {
	short := "http://a.test/p"
	if got := BoundReferrer(short); got != short {
		t.Errorf("BoundReferrer(%q) = %q", short, got)
	}
	exact := "http://a.test/" + strings.Repeat("x", MaxReferrerBytes-len("http://a.test/"))
	if got := BoundReferrer(exact); got != exact {
		t.Errorf("a referrer of exactly %d bytes was cut to %d", MaxReferrerBytes, len(got))
	}
	long := exact + "yz"
	got := BoundReferrer(long)
	if len(got) != MaxReferrerBytes || !strings.HasSuffix(got, "...") || !strings.HasPrefix(long, strings.TrimSuffix(got, "...")) {
		t.Errorf("BoundReferrer of %d bytes: %d bytes ending %q", len(long), len(got), got[len(got)-8:])
	}
}
