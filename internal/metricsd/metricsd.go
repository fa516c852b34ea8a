// Package metricsd makes internal/metrics the metrics backend of the
// daemons' common framework (internal/daemon): --metrics-addr serves the
// daemon's Prometheus registry. Every daemon's main package imports it for
// that side effect; farroctl does not, so it links no Prometheus code.
package metricsd

import (
	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/metrics"
)

func init() { daemon.SetMetricsBackend(Serve) }

// Serve serves daemon name's metrics on addr (metrics.Serve of
// metrics.Registry(name)); version is reported by farro_build_info.
func Serve(name, version, addr string, allowRemote bool) (daemon.MetricsServer, error) {
	metrics.Version = version
	srv, err := metrics.Serve(addr, allowRemote, metrics.Registry(name))
	if err != nil {
		return nil, err
	}
	return srv, nil
}
