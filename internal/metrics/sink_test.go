package metrics

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/farro-dev/farro/internal/tally"
)

// TestTallyCountsLandHere proves that agentd's counts, which its
// transaction sites make through internal/tally (so that farroctl, which
// shares that code, links no Prometheus), land in these metrics in any
// program that links this package.
func TestTallyCountsLandHere(t *testing.T) {
	read := func(m prometheus.Metric) float64 {
		t.Helper()
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Counter != nil:
			return d.Counter.GetValue()
		case d.Gauge != nil:
			return d.Gauge.GetValue()
		case d.Histogram != nil:
			return float64(d.Histogram.GetSampleCount())
		}
		t.Fatalf("unexpected metric %v", &d)
		return 0
	}
	series := []struct {
		name string
		m    prometheus.Metric
		want float64 // the change expected
	}{
		{"claims_failed_total{vanished}", claimFailed.WithLabelValues("vanished"), 1},
		{"claim_duration_seconds", claimTime, 1},
		{"job_queue_wait_seconds", queueWait, 1},
		{"commit_duration_seconds{noop}", commitTime.WithLabelValues("noop").(prometheus.Metric), 1},
		{"jobs_finished_total{held,crawl.robots}", finished.WithLabelValues(OutcomeHeld, "crawl.robots"), 1},
		{"job_run_duration_seconds{held,other}", runTime.WithLabelValues(OutcomeHeld, KindOther).(prometheus.Metric), 1},
		{"agent_slots_busy", slotsBusy, 2},
		{"crawl_robots_denied_total{sinktest}", crawlRobotsDenied.WithLabelValues("sinktest"), 1},
		{"crawl_pages_total{sinktest,2xx}", crawlPages.WithLabelValues("sinktest", "2xx"), 1},
		{"crawl_bytes_total{sinktest}", crawlBytes.WithLabelValues("sinktest"), 10},
	}
	before := make([]float64, len(series))
	for i, s := range series {
		before[i] = read(s.m)
	}
	tally.ClaimFailed("vanished")
	tally.ClaimDone(time.Millisecond, time.Second)
	tally.CommitDone("noop", time.Millisecond)
	tally.RunFinished("crawl.robots", tally.OutcomeHeld, time.Second)
	tally.RunFinished("my.own.kind", tally.OutcomeHeld, time.Second)
	tally.SlotBusy(2)
	defer tally.SlotBusy(-2)
	tally.CrawlRobotsDenied("sinktest")
	tally.CrawlFetched("sinktest", 204, 10)
	for i, s := range series {
		if d := read(s.m) - before[i]; d != s.want {
			t.Errorf("%s moved by %v, want %v", s.name, d, s.want)
		}
	}
	tally.SetSlots(7)
	if got := read(slots); got != 7 {
		t.Errorf("agent_slots = %v after tally.SetSlots(7)", got)
	}
}

// TestTallyTextIsTheClientsText renders the same gauges with tally.Text
// (what farroctl metrics writes) and with the Prometheus client, with
// label values and help texts that need escaping, labels given out of
// order, and values of every notation: the two texts are the same bytes.
func TestTallyTextIsTheClientsText(t *testing.T) {
	values := []float64{0, 1, -1, 0.1, 2.5e-7, 1795544644.2848508, 1e21, 123456789, math.NaN(), math.Inf(1), math.Inf(-1)}
	fams := []tally.Family{
		{Name: "zz_last", Help: `back\slash and "quotes" and` + "\nnewline", Samples: []tally.Sample{{Value: 3}}},
		{Name: "aa_first", Help: "labelled", Samples: nil},
		{Name: "empty_family", Help: "no samples: not written"},
	}
	reg := prometheus.NewRegistry()
	desc := prometheus.NewDesc("zz_last", fams[0].Help, nil, nil)
	labelled := prometheus.NewDesc("aa_first", "labelled", []string{"b", "a"}, nil)
	reg.MustRegister(collectorFunc(func(ch chan<- prometheus.Metric) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, 3)
		for i, v := range values {
			b := fmt.Sprintf("v%02d", len(values)-i)
			a := []string{`q"uote`, `back\slash`, "new\nline", "plain", "ünï"}[i%5]
			ch <- prometheus.MustNewConstMetric(labelled, prometheus.GaugeValue, v, b, a)
		}
	}))
	for i, v := range values {
		fams[1].Samples = append(fams[1].Samples, tally.Sample{Labels: []tally.Label{
			{Name: "b", Value: fmt.Sprintf("v%02d", len(values)-i)},
			{Name: "a", Value: []string{`q"uote`, `back\slash`, "new\nline", "plain", "ünï"}[i%5]},
		}, Value: v})
	}
	want, err := Text(reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := tally.Text(fams); !bytes.Equal(got, want) {
		t.Errorf("tally.Text:\n%s\nthe Prometheus client:\n%s", got, want)
	}
}

// collectorFunc is a collector of fixed descriptions.
type collectorFunc func(ch chan<- prometheus.Metric)

func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

func (f collectorFunc) Describe(ch chan<- *prometheus.Desc) {}
