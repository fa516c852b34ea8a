package daemon

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/metrics"
)

// The daemons install internal/metrics as the backend through
// internal/metricsd, which imports this package: these tests install the
// same backend themselves.
func init() {
	SetMetricsBackend(func(name, version, addr string, allowRemote bool) (MetricsServer, error) {
		metrics.Version = version
		srv, err := metrics.Serve(addr, allowRemote, metrics.Registry(name))
		if err != nil {
			return nil, err
		}
		return srv, nil
	})
}

// testApp is a daemon with a required flag, like agentd's --id.
func testApp(out io.Writer, action cli.ActionFunc) *cli.App {
	app := App("testd", "a test daemon", []cli.Flag{
		&cli.StringFlag{Name: "id", Required: true, EnvVars: []string{"FARRO_TEST_ID"}, Usage: "agent id"},
	}, action)
	app.Writer, app.ErrWriter = out, out
	return app
}

func TestRunAnswersCompletionAndManWithoutRequiredFlags(t *testing.T) {
	var out bytes.Buffer
	ran := false
	action := func(*cli.Context) error { ran = true; return nil }
	if err := Run(testApp(&out, action), []string{"testd", "completion", "bash"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "complete -F _farro_testd testd") || !strings.Contains(out.String(), "--metrics-addr") {
		t.Errorf("bash completion:\n%s", out.String())
	}
	out.Reset()
	if err := Run(testApp(&out, action), []string{"testd", "man"}); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{`.TH TESTD 1 "" "farro `, ".SH ENVIRONMENT", `\fBFARRO_TEST_ID\fP`, `\fBFARRO_METRICS_ADDR\fP`, "a test daemon"} {
		if !strings.Contains(page, want) {
			t.Errorf("man page lacks %q:\n%s", want, page)
		}
	}
	if err := Run(testApp(&out, action), []string{"testd", "completion"}); err == nil {
		t.Error("completion without a shell accepted")
	}
	if err := Run(testApp(&out, action), []string{"testd", "completion", "fish"}); err == nil {
		t.Error("completion fish accepted")
	}
	if ran {
		t.Error("the daemon's action ran")
	}
}

func TestMetricsEndpointLivesWithTheAction(t *testing.T) {
	var out bytes.Buffer
	var addr string
	action := func(c *cli.Context) error {
		srv := c.App.Metadata[metricsKey].(MetricsServer)
		addr = srv.Addr()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `farro_build_info{`) {
			t.Errorf("scrape:\n%s", body)
		}
		if !MetricsEnabled(c) {
			t.Error("MetricsEnabled is false")
		}
		return nil
	}
	if err := Run(testApp(&out, action), []string{"testd", "--id", "x", "--metrics-addr", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		t.Fatal("action did not run")
	}
	if !strings.Contains(out.String(), "metrics endpoint listening") || !strings.Contains(out.String(), `"actor":"testd/x"`) {
		t.Errorf("log:\n%s", out.String())
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("endpoint still up after the daemon returned")
	}

	ran := false
	err := Run(testApp(&out, func(*cli.Context) error { ran = true; return nil }),
		[]string{"testd", "--id", "x", "--metrics-addr", "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "--metrics-allow-remote") || ran {
		t.Errorf("non-loopback address: err %v, action ran %v", err, ran)
	}
}
