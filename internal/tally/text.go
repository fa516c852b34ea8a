package tally

import (
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/pkg/job"
)

// TextfileName is the file `farroctl metrics --textfile DIR` writes.
const TextfileName = "farro.prom"

// The spool's gauges, which managerd exports (internal/metrics) and
// `farroctl metrics` prints (SpoolText): their names and help texts.
const (
	BuildInfoName = "farro_build_info"
	BuildInfoHelp = "Always 1; the labels say which farro build and which program this is."
	JobsName      = "farro_jobs"
	JobsHelp      = "Jobs in the spool, by state (the directory they are in); every state is present, zeros included."
	ByKindName    = "farro_jobs_by_kind"
	ByKindHelp    = "Queued jobs (state=\"queued\", incoming/) by job kind; a kind farro does not know is counted as other. Every kind is present, zeros included."
	OldestName    = "farro_oldest_queued_job_timestamp_seconds"
	OldestHelp    = "created_at of the oldest job in incoming/ (Unix time); 0 when nothing is queued."
	LocksName     = "farro_claim_locks"
	LocksHelp     = "Claim locks in incoming/ (jobs being claimed, run, or moved right now)."
	CorruptName   = "farro_corrupt_entries"
	CorruptHelp   = "Quarantined entries in corrupt/ (never deleted by farro; see farroctl fsck)."
	RescanName    = "farro_spool_last_rescan_timestamp_seconds"
	RescanHelp    = "When the spool was last listed in full (Unix time); between listings the figures follow fsnotify events."
)

// Label is one label pair of a sample.
type Label struct{ Name, Value string }

// Sample is one value of a family, with its labels.
type Sample struct {
	Labels []Label
	Value  float64
}

// Family is a metric family of gauges.
type Family struct {
	Name, Help string
	Samples    []Sample
}

// SpoolFamilies are the spool's figures from snap and farro_build_info
// (version, this Go, program): the gauges of managerd's spool collector.
// Until the view's first listing is done there is only build info.
func SpoolFamilies(program, version string, snap spoolview.Snapshot) []Family {
	fams := []Family{{Name: BuildInfoName, Help: BuildInfoHelp, Samples: []Sample{{
		Labels: []Label{{"version", version}, {"goversion", runtime.Version()}, {"program", program}}, Value: 1}}}}
	if !snap.Ready {
		return fams
	}
	jobs := Family{Name: JobsName, Help: JobsHelp}
	for _, st := range job.States {
		jobs.Samples = append(jobs.Samples, Sample{Labels: []Label{{"state", string(st)}}, Value: float64(snap.States[st])})
	}
	byKind := make(map[string]int, len(Kinds)+1)
	for _, k := range KindLabels() {
		byKind[k] = 0
	}
	for k, n := range snap.QueuedKinds {
		byKind[KindLabel(k)] += n
	}
	kinds := Family{Name: ByKindName, Help: ByKindHelp}
	for k, n := range byKind {
		kinds.Samples = append(kinds.Samples, Sample{Labels: []Label{{"state", string(job.Queued)}, {"kind", k}}, Value: float64(n)})
	}
	oldest := 0.0
	if !snap.OldestQueued.IsZero() {
		oldest = float64(snap.OldestQueued.UnixNano()) / 1e9
	}
	return append(fams, jobs, kinds,
		Family{Name: OldestName, Help: OldestHelp, Samples: []Sample{{Value: oldest}}},
		Family{Name: LocksName, Help: LocksHelp, Samples: []Sample{{Value: float64(snap.Locks)}}},
		Family{Name: CorruptName, Help: CorruptHelp, Samples: []Sample{{Value: float64(snap.Corrupt)}}},
		Family{Name: RescanName, Help: RescanHelp, Samples: []Sample{{Value: float64(snap.LastRescan.UnixNano()) / 1e9}}})
}

// SpoolText is SpoolFamilies in the Prometheus text format.
func SpoolText(program, version string, snap spoolview.Snapshot) []byte {
	return Text(SpoolFamilies(program, version, snap))
}

// Text renders fams as gauges in the Prometheus text format (0.0.4), as
// the Prometheus client's registry and encoder do: families by name,
// label pairs by label name, samples by their label values, values in
// Go's shortest float notation; help texts and label values escaped.
func Text(fams []Family) []byte {
	fams = slices.Clone(fams)
	slices.SortFunc(fams, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	var b []byte
	for _, f := range fams {
		if len(f.Samples) == 0 {
			continue
		}
		b = append(b, "# HELP "+f.Name+" "...)
		b = appendEscaped(b, f.Help, false)
		b = append(b, "\n# TYPE "+f.Name+" gauge\n"...)
		samples := make([]Sample, len(f.Samples))
		for i, s := range f.Samples {
			s.Labels = slices.Clone(s.Labels)
			slices.SortFunc(s.Labels, func(x, y Label) int { return strings.Compare(x.Name, y.Name) })
			samples[i] = s
		}
		slices.SortFunc(samples, func(x, y Sample) int {
			for i := range min(len(x.Labels), len(y.Labels)) {
				if c := strings.Compare(x.Labels[i].Value, y.Labels[i].Value); c != 0 {
					return c
				}
			}
			return len(x.Labels) - len(y.Labels)
		})
		for _, s := range samples {
			b = append(b, f.Name...)
			if len(s.Labels) > 0 {
				b = append(b, '{')
				for i, l := range s.Labels {
					if i > 0 {
						b = append(b, ',')
					}
					b = append(b, l.Name+`="`...)
					b = appendEscaped(b, l.Value, true)
					b = append(b, '"')
				}
				b = append(b, '}')
			}
			b = append(b, ' ')
			b = appendFloat(b, s.Value)
			b = append(b, '\n')
		}
	}
	return b
}

// appendEscaped escapes \ and newlines (and " in a label value).
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}
