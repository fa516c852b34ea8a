// Package fsqtest plants, for tests, the entries nobody in farro makes
// where a spool file must be: each can block an open(2) (a FIFO), fail
// it oddly (a socket), be no file at all (a directory), exhaust memory if
// read whole (a 1 GiB sparse file) or lead elsewhere (a symlink).
package fsqtest

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The hostile kinds PlantHostile makes.
const (
	FIFO      = "fifo"
	Socket    = "socket"
	Directory = "directory"
	Sparse    = "sparse 1GiB"
	Symlink   = "symlink"
)

// HostileKinds lists every kind, for table tests.
var HostileKinds = []string{FIFO, Socket, Directory, Sparse, Symlink}

// PlantHostile replaces path with an entry of kind (a symlink points at a
// regular file of its own, so that only refusing the link protects the
// reader).
func PlantHostile(t testing.TB, path, kind string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	var err error
	switch kind {
	case FIFO:
		err = syscall.Mkfifo(path, 0o644)
	case Socket:
		// A socket path is limited to 108 bytes: bind in a short
		// directory, then move the socket into place.
		short, merr := os.MkdirTemp("", "sk")
		if merr != nil {
			t.Fatal(merr)
		}
		t.Cleanup(func() { os.RemoveAll(short) })
		ln, lerr := net.Listen("unix", filepath.Join(short, "s"))
		if lerr != nil {
			t.Fatal(lerr)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		t.Cleanup(func() { ln.Close() })
		err = os.Rename(filepath.Join(short, "s"), path)
	case Directory:
		err = os.Mkdir(path, 0o755)
	case Sparse:
		if err = os.WriteFile(path, nil, 0o644); err == nil {
			err = os.Truncate(path, 1<<30)
		}
	case Symlink:
		target := filepath.Join(t.TempDir(), "target")
		if err = os.WriteFile(target, []byte("{}\n"), 0o644); err == nil {
			err = os.Symlink(target, path)
		}
	default:
		t.Fatalf("unknown hostile kind %q", kind)
	}
	if err != nil {
		t.Fatalf("plant %s at %s: %v", kind, path, err)
	}
}
