package spoolstore_test

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
	"github.com/farro-dev/farro/pkg/store/storetest"
)

// TestConformance runs the store seam's conformance suite over a spool
// in a temporary directory.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		st, err := spoolstore.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}

// TestConformanceIndexed runs the suite over an indexed spool store
// (WithIndex: agentd's claims).
func TestConformanceIndexed(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		sp, err := job.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		st := spoolstore.New(sp, spoolstore.WithIndex(spoolstore.IndexConfig{Rescan: 50 * time.Millisecond, Log: zerolog.Nop()}))
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}
