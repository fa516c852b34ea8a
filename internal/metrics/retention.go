package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/farro-dev/farro/pkg/job"
)

// retentionRemoved counts the terminal jobs managerd's --retention
// deleted, by the state they were deleted from.
var retentionRemoved = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: Namespace, Name: "retention_removed_total",
	Help: "Terminal jobs removed by managerd's retention (--retention), by the state they were in (succeeded, killed).",
}, []string{"state"})

func init() {
	for _, st := range []job.State{job.Succeeded, job.Killed} {
		retentionRemoved.WithLabelValues(string(st))
	}
}

// RetentionRemoved counts one job removed by retention from state st.
func RetentionRemoved(st job.State) { retentionRemoved.WithLabelValues(string(st)).Inc() }
