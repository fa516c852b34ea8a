package frontier_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestPrivateAddressGivesUp: a crawl without allow_private whose site is
// on loopback: the SSRF guard refuses the robots.txt fetch (or, robots.txt
// ignored, the seed's), the domain is blocked with reason
// private_address at once (no cooldown, however long block_cooldown is)
// and the crawl, with nothing else left, is done; nothing reached the
// site.
func TestPrivateAddressGivesUp(t *testing.T) {
	for _, obey := range []bool{true, false} {
		name := "priv-robots"
		if !obey {
			name = "priv-fetch"
		}
		t.Run(name, func(t *testing.T) {
			site := testsite.Start(testsite.Options{Plain: true, Fanout: 2, Levels: 2})
			defer site.Close()
			e := startEnv(t, 2)
			defer e.stop()
			c := plainCrawl(site, name)
			c.AllowPrivate = false
			c.ObeyRobots = obey
			c.BlockCooldown = crawl.Duration(time.Hour)
			c.UnreachableCooldown = crawl.Duration(time.Hour)
			c.MaxDomainRetries = 3
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			st, _ := crawl.Open(e.spool, name)
			if err := st.Create(c); err != nil {
				t.Fatal(err)
			}
			waitState(t, st, crawl.Done, 20*time.Second)
			doms, err := st.Domains()
			if err != nil {
				t.Fatal(err)
			}
			if len(doms) != len(c.Seeds) {
				t.Fatalf("%d domains, want %d", len(doms), len(c.Seeds))
			}
			for _, d := range doms {
				if d.Status != crawl.DomainBlocked || d.Reason != crawl.ReasonPrivateAddress || d.NextCrawlAfter != nil ||
					!strings.Contains(d.ReasonDetail, "--allow-private") {
					t.Errorf("domain %s: %s %s (%s), next_crawl_after %v: want blocked private_address naming --allow-private, no cooldown",
						d.Domain, d.Status, d.Reason, d.ReasonDetail, d.NextCrawlAfter)
				}
			}
			if log := site.Log(); len(log) != 0 {
				t.Errorf("%d requests reached the site: %+v", len(log), log[0])
			}
			// Robots.txt ignored: each seed's fetch was refused, and its
			// outcome says why.
			refused := 0
			if err := st.ScanOutcomes(func(o *crawl.Outcome) bool {
				if o.Outcome == crawl.OutcomePrivateAddress {
					refused++
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: len(c.Seeds)}[obey]; refused != want {
				t.Errorf("%d private_address outcomes, want %d", refused, want)
			}
			// Their export rows say so, without a fetched_at.
			var out bytes.Buffer
			if err := (&ctl.Ctl{Root: e.spool.Root, Stdout: &out, Stderr: &out}).CrawlExport(name); err != nil {
				t.Fatal(err)
			}
			rows := 0
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if line == "" {
					continue
				}
				rows++
				var r map[string]any
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("%v: %s", err, line)
				}
				_, hasFetched := r["fetched_at"]
				if r["outcome"] != crawl.OutcomePrivateAddress || r["error_code"] != crawl.ErrCodePrivate || hasFetched || r["depth"] != 0.0 || r["referrer"] != "" {
					t.Errorf("export row %s: want outcome private_address, depth 0, referrer \"\", no fetched_at", line)
				}
			}
			if rows != refused {
				t.Errorf("%d export rows, want %d", rows, refused)
			}
		})
	}
}
