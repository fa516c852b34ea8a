package fetch

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// The gate stays shut while the passing fetcher has not sent its request:
// the next fetcher passes only interval after the release, however long the
// first one took to send.
func TestPassGateHoldsUntilSent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gate")
	const interval = 30 * time.Millisecond
	release, err := passGate(context.Background(), path, interval)
	if err != nil {
		t.Fatal(err)
	}
	passed := make(chan time.Time, 1)
	go func() {
		r, err := passGate(context.Background(), path, interval)
		if err != nil {
			t.Error(err)
		}
		passed <- time.Now()
		r()
	}()
	time.Sleep(80 * time.Millisecond) // a slow send: descheduled, slow connect
	released := time.Now()
	release()
	release() // idempotent
	got := <-passed
	if gap := got.Sub(released); gap < interval {
		t.Errorf("second fetcher passed %s after the first one's release, want >= %s", gap, interval)
	}
}
