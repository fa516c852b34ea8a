package fsq

// Op names a filesystem operation performed by this package.
type Op string

// The operations reported to an Observer.
const (
	OpCreate  Op = "create"
	OpWrite   Op = "write" // atomic replace: temp write + fsync + rename
	OpAppend  Op = "append"
	OpSyncDir Op = "fsync-dir"
	OpMkdir   Op = "mkdir"
	OpRename  Op = "rename"
	OpRemove  Op = "remove"
	OpBarrier Op = "barrier" // Barrier.Wait: syncfs of the whole file system
)

// Observer is called before each filesystem operation. It exists for the
// crash-simulation harness (test/crash), which records operations and
// injects crashes; production code leaves it nil.
type Observer func(op Op, path, path2 string)

var observer Observer

// SetObserver installs o (nil removes it). It is not safe to call while
// other goroutines use the package.
func SetObserver(o Observer) { observer = o }

func hook(op Op, path, path2 string) {
	if observer != nil {
		observer(op, path, path2)
	}
}
