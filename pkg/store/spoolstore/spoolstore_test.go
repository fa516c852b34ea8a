package spoolstore_test

import (
	"testing"

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
