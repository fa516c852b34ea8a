package job

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// isWriteTemp reports whether name is one of the temp files that fsq.WriteFile (renameio) makes
// beside the files farro rewrites in a job directory: a dot, the target's
// name, digits. A process killed in the middle of such a write (a
// heartbeat, a commit, an operator's control request) leaves one behind.
// Only these names count: a handler's own dot files are never touched.
func isWriteTemp(name string) bool {
	for _, target := range []string{".job.json", ".control.json"} {
		if rest, ok := strings.CutPrefix(name, target); ok {
			rest = strings.TrimPrefix(rest, "-")
			return rest != "" && strings.Trim(rest, "0123456789") == ""
		}
	}
	return false
}

// TempGrace is the age past which a temp file of an atomic write in a job
// directory is taken to be abandoned. A live write keeps its temp file for
// milliseconds; a younger one may belong to another writer (a control
// request being written by farroctl, or a newer claim of the job when the
// caller is a stale one), and only its own writer removes it.
var TempGrace = time.Minute

// dropTemps removes the temp files of interrupted atomic writes older than
// grace from the job directory dir, so that they do not travel with the
// job into its final state. Recovery passes 0: it holds the recovery guard
// of a holder proven dead or silent with its handler gone. The removal is
// made durable with the directory's next fsync (the caller's job.json
// write or rename), or here when nothing else would.
func dropTemps(dir string, grace time.Duration, sync bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	removed := false
	cutoff := time.Now().Add(-grace)
	for _, e := range ents {
		if isWriteTemp(e.Name()) && e.Type().IsRegular() {
			if fi, err := e.Info(); grace > 0 && (err != nil || fi.ModTime().After(cutoff)) {
				continue
			}
			if os.Remove(filepath.Join(dir, e.Name())) == nil {
				removed = true
			}
		}
	}
	if removed && sync {
		_ = fsq.SyncDir(dir)
	}
}
