package metricsd_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/daemon"
	_ "github.com/farro-dev/farro/internal/metricsd"
)

// TestDaemonServesItsMetrics runs a daemon built on internal/daemon, as
// agentd, managerd and watchdogd are, with --metrics-addr: linking
// internal/metricsd is what makes it serve its Prometheus registry (the
// daemon framework itself links no Prometheus code).
func TestDaemonServesItsMetrics(t *testing.T) {
	var out bytes.Buffer
	var body string
	app := daemon.App("testd", "a test daemon", nil, func(c *cli.Context) error {
		srv, ok := c.App.Metadata["farro-metrics-server"].(daemon.MetricsServer)
		if !ok {
			t.Fatal("no metrics server while the daemon runs")
		}
		resp, err := http.Get("http://" + srv.Addr() + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err
	})
	app.Writer, app.ErrWriter = &out, &out
	if err := daemon.Run(app, []string{"testd", "--metrics-addr", "127.0.0.1:0"}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{`farro_build_info{goversion="`, `program="testd",version="` + daemon.Version + `"} 1`, "go_goroutines ", "process_open_fds "} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q:\n%s", want, body)
		}
	}
}
