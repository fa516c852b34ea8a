package metrics

import "github.com/farro-dev/farro/internal/tally"

// Kinds lists the job kinds that get a label value of their own in the
// metrics that carry a kind (tally.Kinds).
var Kinds = tally.Kinds

// KindOther is the kind label value of every kind not in Kinds.
const KindOther = tally.KindOther

// KindLabel is the kind label value for a job of kind k.
func KindLabel(k string) string { return tally.KindLabel(k) }

// kindLabels is Kinds and KindOther: every kind label value.
func kindLabels() []string { return tally.KindLabels() }
