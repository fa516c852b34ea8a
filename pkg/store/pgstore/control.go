package pgstore

import (
	"context"
	"time"
)

// Request checks in batches. Every running job's agent asks, before its
// commit and every second while the handler runs, whether an operator's
// request is pending for the attempt (PendingControl). The checks of a
// Store's claims go together in one read (controlSQL), fenced row by row
// as a single check is: a row answers only while it is still the claim's
// (token, in-progress).

type controlReq struct {
	id, token string
	res       chan controlRes // buffered: a caller that gave up is not waited for
}

type controlRes struct {
	held bool   // the row is still the claim's
	raw  []byte // its control column (nil: none)
	err  error
}

const controlSQL = `SELECT j.id, j.claim_token, j.control FROM jobs j
	JOIN unnest($1::text[], $2::text[]) AS u(id, token) ON j.id = u.id AND j.claim_token = u.token
	WHERE j.status = 'in-progress'`

// pendingControl reads the control column of job id while claim token
// holds it; held false when it does not.
func (s *Store) pendingControl(ctx context.Context, id, token string) (bool, []byte, error) {
	r := &controlReq{id: id, token: token, res: make(chan controlRes, 1)}
	if !s.controls.add(r) {
		return false, nil, errClosed
	}
	select {
	case res := <-r.res:
		return res.held, res.raw, res.err
	case <-ctx.Done():
		return false, nil, ctx.Err()
	}
}

func (s *Store) flushControls(batch []*controlReq) {
	ids, tokens := make([]string, len(batch)), make([]string, len(batch))
	for i, r := range batch {
		ids[i], tokens[i] = r.id, r.token
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	found := make(map[string][]byte, len(batch))
	rows, err := s.pool.Query(ctx, controlSQL, ids, tokens)
	if err == nil {
		for rows.Next() {
			var id, token string
			var raw []byte
			if err = rows.Scan(&id, &token, &raw); err != nil {
				break
			}
			found[id+"\x00"+token] = raw
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for _, r := range batch {
		raw, ok := found[r.id+"\x00"+r.token]
		r.res <- controlRes{held: ok, raw: raw, err: err}
	}
}
