package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// completionTimeout bounds the completion of job IDs on a database
// (connecting included): a shell waits for it.
const completionTimeout = 5 * time.Second

// storeCompleteIDs is CompleteIDs on a PostgreSQL store: the IDs of the
// jobs in states that start with prefix, in ID order, at most
// MaxCompletions, read from the database's listing from prefix on (the
// listing is in ID order: the matches come first, and it stops at the
// first ID that does not match). The shell waits for it: it gives up
// after completionTimeout.
func (c *Ctl) storeCompleteIDs(states []job.State, prefix string) error {
	var ids []string
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	st, err := pgstore.Open(ctx, c.Store)
	if err != nil {
		return fmt.Errorf("%s: %s", storeName(c.Store), oneLine(err.Error()))
	}
	defer st.Close()
	err = func() error {
		if prefix != "" {
			if j, err := st.Get(ctx, prefix); err == nil && slices.Contains(states, j.Status) {
				ids = append(ids, j.ID)
			} else if err != nil && !errors.Is(err, job.ErrNotFound) {
				return err
			}
		}
		err := st.List(ctx, store.Filter{States: states, AfterID: prefix}, func(j *job.Job) error {
			if !strings.HasPrefix(j.ID, prefix) || len(ids) >= MaxCompletions {
				return errEnough
			}
			ids = append(ids, j.ID)
			return nil
		})
		if errors.Is(err, errEnough) {
			err = nil
		}
		return err
	}()
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(id)
		b.WriteByte('\n')
	}
	_, err = io.WriteString(c.Stdout, b.String())
	return err
}
