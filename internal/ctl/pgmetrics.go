package ctl

import (
	"github.com/farro-dev/farro/internal/tally"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// storeMetrics is metrics on a PostgreSQL store: the queue's gauges
// (tally.StoreFamilies: jobs per state, queued jobs per kind, the oldest
// queued job) read from the database in one snapshot, and
// farro_build_info; the spool's locks, corrupt entries and relisting
// time have no counterpart there and are left out.
func (c *Ctl) storeMetrics(o MetricsOptions) error {
	if err := checkTextfile(o.Textfile); err != nil {
		return err
	}
	var g pgstore.Gauges
	err := c.withStore(func(d *storeDoor) error {
		pg, ok := d.st.(*pgstore.Store)
		if !ok {
			return SpoolOnly("metrics")
		}
		var err error
		g, err = pg.Gauges(d.ctx)
		return err
	})
	if err != nil {
		return err
	}
	return c.writeMetrics(o, tally.StoreText("farroctl", o.Version, tally.StoreSnapshot(g)))
}
