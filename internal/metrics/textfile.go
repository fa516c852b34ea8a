package metrics

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/farro-dev/farro/pkg/fsq"
)

// TextfileName is the file `farroctl metrics --textfile DIR` writes.
const TextfileName = "farro.prom"

// Text renders everything g gathers in the Prometheus text format.
func Text(g prometheus.Gatherer) ([]byte, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// WriteTextfile writes g to dir/farro.prom for node_exporter's textfile
// collector, atomically and durably (fsq.WriteFile: a temp file beside it,
// a dot file node_exporter ignores, renamed over it): a scrape never reads
// half a file. It returns the path written.
func WriteTextfile(dir string, g prometheus.Gatherer) (string, error) {
	data, err := Text(g)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, TextfileName)
	if err := fsq.WriteFile(path, data, fsq.WithPerm(0o644)); err != nil {
		return "", fmt.Errorf("textfile: %w", err)
	}
	return path, nil
}
