package tally

// Kinds lists the job kinds that get a label value of their own in the
// metrics that carry a kind: the kinds farro's agents have handlers for.
// Every other kind is counted under KindOther, so that a job naming any
// kind it likes (job.json is anyone's input) cannot add series.
var Kinds = []string{"exec", "noop", "crawl.fetch", "crawl.robots", "source.check"}

// KindOther is the kind label value of every kind not in Kinds.
const KindOther = "other"

// KindLabel is the kind label value for a job of kind k.
func KindLabel(k string) string {
	for _, known := range Kinds {
		if k == known {
			return k
		}
	}
	return KindOther
}

// KindLabels is Kinds and KindOther: every kind label value (a new slice).
func KindLabels() []string { return append(append([]string(nil), Kinds...), KindOther) }
