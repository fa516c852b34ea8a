package job

import (
	"os"
	"path/filepath"
	"regexp"

	"github.com/farro-dev/farro/pkg/fsq"
)

// writeTemp matches the temp files that fsq.WriteFile (renameio) makes
// beside the files farro rewrites in a job directory: a dot, the target's
// name, digits. A process killed in the middle of such a write (a
// heartbeat, a commit, an operator's control request) leaves one behind.
// Only these names count: a handler's own dot files are never touched.
var writeTemp = regexp.MustCompile(`^\.(job\.json|control\.json)-?[0-9]+$`)

// dropTemps removes the temp files of interrupted atomic writes from the
// job directory dir, so that they do not travel with the job into its
// final state. The caller holds the job's lock, so no job.json write of
// a live process can be under way; a control request being written at the
// same moment by farroctl (which takes no lock) loses its temp file, sees
// fsq.ErrVanished and locates the job again. The removal is made durable
// with the directory's next fsync (the caller's job.json write or rename),
// or here when nothing else would.
func dropTemps(dir string, sync bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	removed := false
	for _, e := range ents {
		if writeTemp.MatchString(e.Name()) && e.Type().IsRegular() {
			if os.Remove(filepath.Join(dir, e.Name())) == nil {
				removed = true
			}
		}
	}
	if removed && sync {
		_ = fsq.SyncDir(dir)
	}
}
