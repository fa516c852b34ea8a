package metrics

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/internal/tally"
	"github.com/farro-dev/farro/pkg/job"
)

func TestCheckAddr(t *testing.T) {
	ok := []string{"127.0.0.1:9641", "127.1.2.3:0", "[::1]:9641", "localhost:9641"}
	for _, a := range ok {
		if err := CheckAddr(a, false); err != nil {
			t.Errorf("CheckAddr(%q) = %v, want ok", a, err)
		}
	}
	refused := []string{":9641", "0.0.0.0:9641", "[::]:9641", "192.0.2.1:9641", "9641", "127.0.0.1"}
	for _, a := range refused {
		if err := CheckAddr(a, false); err == nil {
			t.Errorf("CheckAddr(%q) = nil, want refused", a)
		}
	}
	for _, a := range []string{":9641", "0.0.0.0:9641", "192.0.2.1:9641"} {
		if err := CheckAddr(a, true); err != nil {
			t.Errorf("CheckAddr(%q, allowRemote) = %v, want ok", a, err)
		}
	}
}

func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("not the Prometheus text format: %v\n%s", err, text)
	}
	return mfs
}

// value returns the value of the sample of family name whose labels
// include want.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range mf.Metric {
		match := true
		for k, v := range want {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("no sample of %s with %v", name, want)
	return 0
}

func TestServeScrapesTheRegistry(t *testing.T) {
	RunFinished("exec", OutcomeSucceeded, 3*time.Second)
	RunFinished("noop", OutcomeFailed, 2*time.Hour)
	hostile := strings.Repeat("x", 1000)
	RunFinished(hostile, OutcomeKilled, time.Second)
	CommitDone(hostile, time.Millisecond)
	CommitDone("exec", time.Millisecond)
	Recovered(job.ActionStale, true)
	Recovered(job.ActionStale, false)
	Recovered(job.ActionRolledForward, false)
	Recovered(job.ActionNone, false)
	ClaimDone(2*time.Millisecond, 90*time.Second)
	CrawlFetched("c1", 404, 100)
	CrawlFetched("c1", 0, 0)
	CrawlRobotsDenied("c2")

	srv, err := Serve("127.0.0.1:0", false, Registry(Agentd))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	mfs := parse(t, string(body))
	if v := value(t, mfs, "farro_jobs_finished_total", map[string]string{"outcome": "succeeded", "kind": "exec"}); v != 1 {
		t.Errorf("succeeded exec runs %v, want 1", v)
	}
	// A kind farro does not know is counted as other, never as itself.
	if v := value(t, mfs, "farro_jobs_finished_total", map[string]string{"outcome": "killed", "kind": KindOther}); v != 1 {
		t.Errorf("killed runs of kind other %v, want 1", v)
	}
	if v := value(t, mfs, "farro_job_run_duration_seconds", map[string]string{"outcome": "killed", "kind": KindOther}); v != 1 {
		t.Errorf("killed run durations of kind other %v, want 1", v)
	}
	if v := value(t, mfs, "farro_commit_duration_seconds", map[string]string{"kind": KindOther}); v != 1 {
		t.Errorf("commit durations of kind other %v, want 1", v)
	}
	if v := value(t, mfs, "farro_jobs_finished_total", map[string]string{"outcome": "lost", "kind": "noop"}); v != 0 {
		t.Errorf("lost noop runs %v, want 0 (present, zero)", v)
	}
	if strings.Contains(string(body), hostile[:64]) {
		t.Error("the hostile kind is a label value")
	}
	if v := value(t, mfs, "farro_jobs_finished_total", map[string]string{"outcome": "lost"}); v != 0 {
		t.Errorf("lost runs %v, want 0 (present, zero)", v)
	}
	if v := value(t, mfs, "farro_job_run_duration_seconds", map[string]string{"outcome": "failed"}); v < 1 {
		t.Errorf("failed run durations %v", v)
	}
	if v := value(t, mfs, "farro_job_queue_wait_seconds", nil); v < 1 {
		t.Errorf("queue waits %v", v)
	}
	if v := value(t, mfs, "farro_crawl_pages_total", map[string]string{"crawl": "c1", "class": "2xx"}); v != 0 {
		t.Errorf("c1 2xx pages %v, want 0 (present, zero)", v)
	}
	if v := value(t, mfs, "farro_crawl_bytes_total", map[string]string{"crawl": "c1"}); v != 100 {
		t.Errorf("c1 bytes %v, want 100", v)
	}
	if v := value(t, mfs, "farro_crawl_robots_denied_total", map[string]string{"crawl": "c2"}); v != 1 {
		t.Errorf("c2 robots denied %v, want 1", v)
	}
	if v := value(t, mfs, "farro_crawl_pages_total", map[string]string{"crawl": "c1", "class": "4xx"}); v != 1 {
		t.Errorf("4xx pages %v", v)
	}
	if v := value(t, mfs, "farro_crawl_pages_total", map[string]string{"class": "network_error"}); v < 1 {
		t.Errorf("network errors %v", v)
	}
	if v := value(t, mfs, "farro_build_info", map[string]string{"program": Agentd}); v != 1 {
		t.Errorf("build info %v", v)
	}
	for _, name := range []string{"go_goroutines", "process_open_fds", "farro_claim_duration_seconds", "farro_commit_duration_seconds", "farro_agent_slots_busy"} {
		if _, ok := mfs[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	// The registry is agentd's: watchdogd's and managerd's metrics are not in it.
	for _, name := range []string{"farro_recoveries_total", "farro_retries_total", "farro_jobs"} {
		if _, ok := mfs[name]; ok {
			t.Errorf("%s exported by agentd", name)
		}
	}
	// The job buckets reach a day; the transaction buckets start below a millisecond.
	h := mfs["farro_job_run_duration_seconds"].Metric[0].Histogram
	if last := h.Bucket[len(h.Bucket)-1].GetUpperBound(); last < 86400 {
		t.Errorf("largest run-time bucket %v, want >= 1 day", last)
	}
	if first := mfs["farro_claim_duration_seconds"].Metric[0].Histogram.Bucket[0].GetUpperBound(); first > 0.001 {
		t.Errorf("smallest claim bucket %v, want < 1ms", first)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := http.Get("http://" + srv.Addr() + "/metrics"); err == nil {
		t.Error("endpoint still answers after Close")
	}
}

func TestServeRefusesRemoteAndBusy(t *testing.T) {
	if _, err := Serve("0.0.0.0:0", false, Registry(Agentd)); err == nil {
		t.Fatal("0.0.0.0 accepted without allowRemote")
	}
	a, err := Serve("127.0.0.1:0", false, Registry(Agentd))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if b, err := Serve(a.Addr(), false, Registry(Agentd)); err == nil {
		b.Close()
		t.Fatal("second endpoint on a busy port started")
	}
}

func TestRecoveryKinds(t *testing.T) {
	read := func() map[string]float64 {
		out := map[string]float64{}
		for _, k := range RecoveryKinds {
			var m dto.Metric
			if err := recoveries.WithLabelValues(k).Write(&m); err != nil {
				t.Fatal(err)
			}
			out[k] = m.Counter.GetValue()
		}
		return out
	}
	before := read()
	cases := []struct {
		action string
		silent bool
		kind   string
	}{
		{job.ActionStale, false, RecoveryDeadOwner},
		{job.ActionStale, true, RecoverySilentOwner},
		{job.ActionRolledForward, false, RecoveryRolledForward},
		{job.ActionRolledBack, true, RecoveryRolledBack},
		{job.ActionRepaired, false, RecoveryRepaired},
		{"quarantined", false, RecoveryQuarantined},
		{job.ActionNone, false, RecoveryLockRemoved},
	}
	for _, c := range cases {
		Recovered(c.action, c.silent)
	}
	after := read()
	for _, c := range cases {
		if after[c.kind]-before[c.kind] != 1 {
			t.Errorf("%s (silent %v): kind %s moved by %v, want 1", c.action, c.silent, c.kind, after[c.kind]-before[c.kind])
		}
	}
}

// TestTextfile renders the spool's figures as farroctl metrics writes them
// for node_exporter (tally.SpoolText, without the Prometheus client), checks
// them byte for byte against the Prometheus client's rendering of managerd's
// collector, and reads them back with the Prometheus text parser.
func TestTextfile(t *testing.T) {
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Submit(job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Submit(job.SubmitRequest{ID: "h", Kind: "noop", Held: true, Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// Kinds farro does not know: a valid one, and a hostile job.json
	// naming a kind of 1000 bytes. Both count as other.
	if _, err := s.Submit(job.SubmitRequest{ID: "u", Kind: "my.kind", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	hostile := strings.Repeat("x", 1000)
	hj := &job.Job{SchemaVersion: job.SchemaVersion, ID: "x", Kind: hostile, Status: job.Queued, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	if err := os.Mkdir(s.JobDir(job.Queued, "", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.JobDir(job.Queued, "", "x"), job.JobFile), hj.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	v := spoolview.New(s, spoolview.Config{})
	reg := SpoolRegistry(Farroctl, v)
	sameText := func() []byte {
		t.Helper()
		want, err := Text(reg)
		if err != nil {
			t.Fatal(err)
		}
		if got := tally.SpoolText(Farroctl, Version, v.Snapshot()); !bytes.Equal(got, want) {
			t.Fatalf("tally.SpoolText differs from the Prometheus client's text:\n%s\nwant:\n%s", got, want)
		}
		return want
	}
	// Not listed yet: no spool figures rather than wrong zeros.
	if text := sameText(); strings.Contains(string(text), "farro_jobs{") || !strings.Contains(string(text), `program="farroctl",version="`+Version+`"`) {
		t.Fatalf("before the first listing:\n%s", text)
	}
	if err := v.Scan(); err != nil {
		t.Fatal(err)
	}
	data := sameText()
	mfs := parse(t, string(data))
	want := map[job.State]float64{job.Queued: 4, job.Held: 1}
	for _, st := range job.States {
		if got := value(t, mfs, "farro_jobs", map[string]string{"state": string(st)}); got != want[st] {
			t.Errorf("farro_jobs{state=%q} = %v, want %v", st, got, want[st])
		}
	}
	byKind := map[string]float64{"noop": 2, KindOther: 2}
	for _, k := range append(append([]string(nil), Kinds...), KindOther) {
		if got := value(t, mfs, "farro_jobs_by_kind", map[string]string{"state": "queued", "kind": k}); got != byKind[k] {
			t.Errorf("farro_jobs_by_kind{state=\"queued\",kind=%q} = %v, want %v", k, got, byKind[k])
		}
	}
	if n := len(mfs["farro_jobs_by_kind"].GetMetric()); n != len(Kinds)+1 {
		t.Errorf("farro_jobs_by_kind has %d series, want %d (the known kinds and other)", n, len(Kinds)+1)
	}
	a, _ := job.ReadJob(s.JobDir(job.Queued, "", "a"))
	got := value(t, mfs, "farro_oldest_queued_job_timestamp_seconds", nil)
	if d := got - float64(a.CreatedAt.UnixNano())/1e9; d > 0.001 || d < -0.001 {
		t.Errorf("oldest queued %v, want a's created_at %v", got, a.CreatedAt)
	}
	for _, name := range []string{"go_goroutines", "process_open_fds"} {
		if _, ok := mfs[name]; ok {
			t.Errorf("textfile carries %s (node_exporter exports its own)", name)
		}
	}
	if mfs["farro_jobs"].GetType() != dto.MetricType_GAUGE {
		t.Errorf("farro_jobs is %v, want a gauge", mfs["farro_jobs"].GetType())
	}
}

// TestScrapeDoesNotTouchTheSpool proves that a scrape lists nothing: once
// the view has listed the spool, the spool is moved out of reach and a
// scrape still answers, with the same figures.
func TestScrapeDoesNotTouchTheSpool(t *testing.T) {
	dir := t.TempDir()
	s, err := job.Open(filepath.Join(dir, "spool"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.Submit(job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	v := spoolview.New(s, spoolview.Config{})
	if err := v.Scan(); err != nil {
		t.Fatal(err)
	}
	reg := SpoolRegistry(Farroctl, v)
	before, err := Text(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "spool"), filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	after, err := Text(reg)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) || !strings.Contains(string(after), `farro_jobs{state="queued"} 3`) {
		t.Fatalf("scrape changed without the spool:\n%s\n---\n%s", before, after)
	}
}

// farro_crawl_domains carries the crawl's name beside the status.
func TestCrawlDomainsByCrawl(t *testing.T) {
	SetCrawlDomains(func() map[string]map[string]int {
		return map[string]map[string]int{"news": {"active": 2, "pending": 0}, "docs": {"active": 1}}
	})
	defer SetCrawlDomains(nil)
	r := prometheus.NewRegistry()
	r.MustRegister(crawlDomains{})
	text, err := Text(r)
	if err != nil {
		t.Fatal(err)
	}
	mfs := parse(t, string(text))
	for _, c := range []struct {
		crawl, status string
		want          float64
	}{{"news", "active", 2}, {"news", "pending", 0}, {"docs", "active", 1}} {
		if v := value(t, mfs, "farro_crawl_domains", map[string]string{"crawl": c.crawl, "status": c.status}); v != c.want {
			t.Errorf("farro_crawl_domains{crawl=%q,status=%q} = %v, want %v", c.crawl, c.status, v, c.want)
		}
	}
}

// farro_crawl_pending_urls gives each crawl's pending URLs as the
// frontier counted them.
func TestCrawlPendingURLs(t *testing.T) {
	SetCrawlPending(func() map[string]int64 { return map[string]int64{"news": 12, "docs": 0} })
	defer SetCrawlPending(nil)
	r := prometheus.NewRegistry()
	r.MustRegister(crawlPending{})
	text, err := Text(r)
	if err != nil {
		t.Fatal(err)
	}
	mfs := parse(t, string(text))
	for crawl, want := range map[string]float64{"news": 12, "docs": 0} {
		if v := value(t, mfs, "farro_crawl_pending_urls", map[string]string{"crawl": crawl}); v != want {
			t.Errorf("farro_crawl_pending_urls{crawl=%q} = %v, want %v", crawl, v, want)
		}
	}
}
