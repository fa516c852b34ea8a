package fetch

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/farro-dev/farro/internal/politeness"
)

// Every request a fetch handler sends passes its domain's politeness gate
// (internal/politeness: one per domain for the whole spool, shared with
// the other crawls and the source checks) where it goes on the wire:
//
//   - the caller waits for a turn (Gates.Wait) before the request;
//   - the connection the request gets (httptrace GotConn) is armed with
//     the turn, and its first successful write tells the gate the request
//     is sent (sendConn.Write): the moment the interval counts from.
//     (httptrace's WroteRequest is not that moment: net/http calls it when
//     the request is in the connection's buffer, before the flush.)
//   - when net/http retries the request on a new connection (a reused
//     connection the server closed), the retry is a request on the wire
//     too: its GotConn waits the gate again (Turn.Resend) before arming.
//   - redirects are not followed by the clients; where a handler follows
//     them (robots.txt) each hop waits for its own domain's turn.

// afterGateHook, when set (tests), runs after a fetcher passed its gate
// and before it sends: a stand-in for being descheduled there.
var afterGateHook func()

// wait takes a turn at domain's gate.
func (h *Handler) wait(ctx context.Context, domain string, interval time.Duration, maxInFlight int) (*politeness.Turn, error) {
	tn, err := h.Gates.Wait(ctx, domain, politeness.Ask{Interval: interval, MaxInFlight: maxInFlight})
	if err != nil {
		return nil, err
	}
	if afterGateHook != nil {
		afterGateHook()
	}
	return tn, nil
}

// sendConn is every connection the fetch clients dial. When armed with a
// turn (httptrace GotConn: the connection now carries that request), its
// first successful write tells the turn the request is sent. (Over HTTP/2
// a connection is shared: another stream's write may do so a little
// early.)
type sendConn struct {
	net.Conn
	armed atomic.Pointer[politeness.Turn]
}

func (c *sendConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		if tn := c.armed.Swap(nil); tn != nil {
			tn.Sent(time.Now())
		}
	}
	return n, err
}

// armConn arms the sendConn under conn (a TLS connection's too) with tn.
func armConn(conn net.Conn, tn *politeness.Turn) {
	if tn == nil {
		return
	}
	for conn != nil {
		if sc, ok := conn.(*sendConn); ok {
			sc.armed.Store(tn)
			return
		}
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		conn = u.NetConn()
	}
}

// gotConn is the GotConn of a request made with turn tn: the first
// connection is armed with the turn; a later one carries a retry of the
// request by net/http, which waits the gate again first.
func gotConn(ctx context.Context, tn *politeness.Turn) func(net.Conn) {
	var conns atomic.Int32
	return func(c net.Conn) {
		if tn == nil {
			return
		}
		if conns.Add(1) > 1 {
			// Still unsent (nothing of the request was written on the
			// first connection): Resend keeps the turn as it is.
			if err := tn.Resend(ctx); err != nil {
				return // stopped: the request fails with ctx
			}
		}
		armConn(c, tn)
	}
}
