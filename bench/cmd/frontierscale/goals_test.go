package main

import (
	"strings"
	"testing"
	"time"
)

func TestFrontierGoals(t *testing.T) {
	t.Parallel()
	full := config{domains: 100000, urls: 10, window: 20 * time.Second}
	cases := []struct {
		name     string
		c        config
		rss      float64
		settled  time.Duration
		rssWant  string
		passWant string
	}{
		{"both met", full, 113, 90 * time.Millisecond, "MET", "MET"},
		{"rss over", full, 300, 90 * time.Millisecond, "NOT MET", "MET"},
		{"pass visits every domain", full, 113, 6500 * time.Millisecond, "MET", "NOT MET"},
		{"just at the limit", full, 256, 500 * time.Millisecond, "MET", "MET"},
		{"no settled run", full, 113, -1, "MET", "NOT MEASURED"},
		{"smaller crawl", config{domains: 10000, urls: 10, window: 5 * time.Second}, 50, time.Millisecond, "NOT MEASURED", "NOT MEASURED"},
	}
	for _, tc := range cases {
		got := frontierGoals(tc.c, tc.rss, tc.settled)
		if len(got) != 2 {
			t.Fatalf("%s: %d lines, want 2: %q", tc.name, len(got), got)
		}
		for i, want := range []string{tc.rssWant, tc.passWant} {
			if v := verdictOf(got[i]); v != want {
				t.Errorf("%s: line %d verdict %q, want %q: %s", tc.name, i, v, want, got[i])
			}
		}
	}
}

// verdictOf is the verdict a goal line ends with.
func verdictOf(line string) string {
	for _, v := range []string{"NOT MEASURED", "NOT MET", "MET"} {
		if strings.HasSuffix(line, v) || strings.Contains(line, ")  "+v+" (") || strings.Contains(line, ")  "+v) {
			return v
		}
	}
	return ""
}
