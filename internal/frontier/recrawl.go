package frontier

import (
	"fmt"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// recrawlRequest applies a recrawl request (farroctl domain reset): the
// domain starts a new round in which every URL it knows (each URL of
// outcomes.jsonl of the domain) is queued again, so its pages are fetched
// again, by jobs of their own (the round is in their IDs). It is the
// refresh round's machinery (refresh.go) asked for by an operator: the
// same order of writes, and the same guard against applying it twice
// (a round started at or after the request has done it). keep: leave
// the file for a later step (jobs of the domain are still in flight: the
// URLs they fetch would be queued again behind them).
func (d *driver) recrawlRequest(r *crawl.Request, now time.Time) (keep bool) {
	dm := d.get(r.Domain)
	if dm == nil {
		d.log.Warn().Str("domain", r.Domain).Msg("recrawl of an unknown domain ignored")
		return false
	}
	dd := dm.d
	if !roundStart(dd).Before(r.RequestedAt) {
		return false // a round started since it was asked
	}
	if len(dd.InFlight) > 0 {
		return true
	}
	// The round starts no earlier than the request, so that the check
	// above finds it applied if the frontier dies before the request
	// file is removed (the step's time may precede the request's).
	at := now
	if at.Before(r.RequestedAt) {
		at = r.RequestedAt
	}
	before := dd.Round
	d.startRefresh([]*dom{dm}, at)
	if dd.Round == before {
		return true // outcomes.jsonl could not be read: try again
	}
	detail := fmt.Sprintf("round %d: every known URL fetched again", dd.Round)
	if r.Reason != "" {
		detail += "; " + r.Reason
	}
	// The round's status change says refresh; this one is the operator's.
	dd.Reason, dd.ReasonDetail = crawl.ReasonReset, detail
	d.dirty[dd.Domain] = true
	d.refreshWork(dm)
	d.log.Info().Str("domain", dd.Domain).Int("round", dd.Round).Str("requested_by", r.Actor).Str("detail", detail).Msg("domain recrawl started")
	return false
}
