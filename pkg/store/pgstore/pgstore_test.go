package pgstore

import (
	"testing"

	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/storetest"
)

// The store seam's conformance suite, each subtest on a fresh database.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newStore(t)
		return s
	})
}
