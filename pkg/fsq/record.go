package fsq

// RecOp names one system-level step taken by this package, as reported to a
// Recorder. Where an Observer sees one call (WriteFile), a Recorder sees the
// steps it is made of (create a temp file, write it, fsync it, rename it,
// fsync the directory), each with the data written: enough to rebuild what
// a power cut could leave on disk (test/crash's power-loss enumeration).
type RecOp string

// The steps reported to a Recorder. Paths are as the caller gave them.
const (
	RecMkdir  RecOp = "mkdir"  // Path: a directory was created
	RecCreate RecOp = "create" // Path: an empty file was created
	RecWrite  RecOp = "write"  // Path: Data was appended to the file
	// RecOverwrite: the file at Path now holds exactly Data, written in
	// place (same inode; pwrite from its start, then truncate to
	// len(Data) when it was longer).
	RecOverwrite RecOp = "overwrite"
	RecFsync     RecOp = "fsync"     // Path: the file's content was fsynced
	RecSyncDir   RecOp = "fsync-dir" // Path: the directory was fsynced
	// RecSyncFS: a Barrier made everything before it durable (syncfs of
	// the file system holding Path). It is recorded when Wait returns;
	// with concurrent writers a change made during the sync would be
	// counted in, so recorders that replay power cuts must drive the
	// package from one goroutine.
	RecSyncFS RecOp = "syncfs"
	RecRename RecOp = "rename" // Path was renamed to Path2, replacing a file there
	// RecExchange: Path and Path2 swapped (renameat2 RENAME_EXCHANGE):
	// each name now holds what the other did.
	RecExchange RecOp = "exchange"
	RecRemove   RecOp = "remove" // Path and everything below it were removed
	// RecBefore comes before each operation of this package (where the
	// Observer is called), before anything changed: a Recorder may compare
	// the disk with what it recorded, to see the changes made behind this
	// package's back (a plain os.Mkdir) and when they were made.
	RecBefore RecOp = "before"
)

// Rec is one step reported to a Recorder.
type Rec struct {
	Op    RecOp
	Path  string
	Path2 string // RecRename's destination
	Data  []byte // RecWrite's bytes (a copy)
}

// Recorder is called after each step has succeeded, in the order the steps
// took effect, and with RecBefore before each operation. It is separate
// from Observer (for crash points) and, like it, exists only for
// test/crash; production code leaves it nil.
type Recorder func(Rec)

var recorder Recorder

// SetRecorder installs r (nil removes it). It is not safe to call while
// other goroutines use the package.
func SetRecorder(r Recorder) { recorder = r }

func record(op RecOp, path, path2 string, data []byte) {
	if recorder == nil {
		return
	}
	var cp []byte
	if data != nil {
		cp = append([]byte(nil), data...)
	}
	recorder(Rec{Op: op, Path: path, Path2: path2, Data: cp})
}
