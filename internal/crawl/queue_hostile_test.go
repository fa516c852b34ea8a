package crawl_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/fsq/fsqtest"
)

// TestQueueSegmentHostile: a FIFO, socket, directory or symlink planted
// where a queue segment belongs makes ReadEntries and AppendEntries fail
// at once; neither blocks the frontier nor writes through a link.
func TestQueueSegmentHostile(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{fsqtest.FIFO, fsqtest.Socket, fsqtest.Directory, fsqtest.Symlink} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "000001.jsonl")
			fsqtest.PlantHostile(t, p, kind)
			done := make(chan error, 2)
			go func() {
				_, _, err := crawl.ReadEntries(p, 0, 10)
				done <- err
			}()
			go func() {
				_, err := crawl.AppendEntries(p, []crawl.Entry{{URL: "http://127.0.0.1/a"}})
				done <- err
			}()
			for i := 0; i < 2; i++ {
				select {
				case err := <-done:
					if err == nil {
						t.Errorf("a queue segment that is a %s was used", kind)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("a queue segment that is a %s blocked for 5s", kind)
				}
			}
		})
	}
}
