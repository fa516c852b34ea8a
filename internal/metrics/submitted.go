package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Actors lists the actor label values of farro_submitted_total besides
// ActorOther: the programs that submit (an actor "managerd/frontier"
// counts as managerd).
var Actors = []string{Farroctl, Managerd, Agentd, Watchdogd}

// ActorOther is the actor label value of an actor naming no farro program.
const ActorOther = "other"

// ActorLabel is the actor label value of a stream line's actor: its
// program, the part before the first "/", when that is a farro program.
func ActorLabel(actor string) string {
	prog, _, _ := strings.Cut(actor, "/")
	for _, a := range Actors {
		if prog == a {
			return a
		}
	}
	return ActorOther
}

// managerd: submissions, counted from the spool-wide event stream.
var submitted = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: Namespace, Name: "submitted_total",
	Help: "Jobs submitted to the spool (to incoming/, deferred/ or held/) since managerd started, counted from the event stream, by job kind (a kind farro does not know: other) and submitting program (farroctl, managerd for the crawl frontier, other).",
}, []string{"kind", "actor"})

func init() {
	for _, k := range kindLabels() {
		for _, a := range []string{Farroctl, Managerd} {
			submitted.WithLabelValues(k, a)
		}
	}
}

// Submitted counts one submission of a job of kind by actor (any strings:
// see KindLabel and ActorLabel).
func Submitted(kind, actor string) {
	submitted.WithLabelValues(KindLabel(kind), ActorLabel(actor)).Inc()
}
