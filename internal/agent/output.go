package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// DefaultOutputMax is agentd's --output-max: the bytes one attempt of an
// exec job may write to stdout and stderr together.
const DefaultOutputMax = 16 << 20

// outputDrain bounds how long the agent reads a handler's output after
// the handler has exited: a process it left behind (a daemonized child)
// may hold the pipes open; past this the pipes are closed.
const outputDrain = 2 * time.Second

// output captures one attempt's stdout and stderr into
// stdout.<N>.log and stderr.<N>.log of the job directory. With no cap the
// files are the handler's stdout and stderr themselves (no goroutine, no
// copy). With a cap the handler writes into pipes that two goroutines
// copy into the files until the attempt's budget (stdout and stderr
// together) is spent; past it they keep reading, so the handler never
// blocks on a full pipe, and count what they drop; a note line saying
// how much was dropped ends each file that lost bytes.
type output struct {
	max    int64
	files  [2]*os.File // stdout, stderr
	rd, wr [2]*os.File // pipes (capped only)
	left   atomic.Int64
	stream [2]streamCount
	wg     sync.WaitGroup
}

type streamCount struct {
	dropped int64
	last    byte  // last byte written, to end the file before a note
	err     error // first write error (e.g. ENOSPC): the rest is dropped
}

var streams = [2]string{job.Stdout, job.Stderr}

// openOutput opens (creates, or appends to: an attempt given back by a
// drain runs again under the same number) the attempt's output files. A
// file planted in their place that is not a regular file (a FIFO, a
// symlink) is refused, never opened for writing.
func openOutput(dir string, attempt int, max int64) (*output, error) {
	o := &output{max: max}
	for i, s := range streams {
		f, err := openOutputFile(filepath.Join(dir, job.OutputFile(s, attempt)))
		if err != nil {
			o.close()
			return nil, fmt.Errorf("capture %s: %w", s, err)
		}
		o.files[i] = f
	}
	if max <= 0 {
		return o, nil
	}
	o.left.Store(max)
	for i := range streams {
		r, w, err := os.Pipe()
		if err != nil {
			o.close()
			return nil, fmt.Errorf("capture %s: %w", streams[i], err)
		}
		o.rd[i], o.wr[i] = r, w
	}
	return o, nil
}

func openOutputFile(path string) (*os.File, error) {
	// O_NONBLOCK: a FIFO planted here opens at once (ENXIO without a
	// reader) instead of blocking the slot; O_NOFOLLOW refuses a symlink.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", filepath.Base(path))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.Size() > 0 {
		// The same attempt number again (its earlier run was released):
		// keep what it wrote and mark where this run begins.
		_, _ = fmt.Fprintf(f, "\n[farro: this attempt runs again at %s; the output above is from its earlier run]\n", time.Now().UTC().Format(time.RFC3339))
	}
	return f, nil
}

// stdout and stderr are what the handler's process gets.
func (o *output) stdout() *os.File { return o.end(0) }
func (o *output) stderr() *os.File { return o.end(1) }

func (o *output) end(i int) *os.File {
	if o.wr[i] != nil {
		return o.wr[i]
	}
	return o.files[i]
}

// started is called once the handler's process has started (or failed
// to): the agent's copies of the pipes' write ends are closed, so that
// the copies end when the handler's do, and the copying begins.
func (o *output) started(ok bool) {
	if o.max <= 0 {
		return
	}
	for i := range streams {
		o.wr[i].Close()
		o.wr[i] = nil
		if ok {
			o.wg.Add(1)
			go o.copy(i)
		}
	}
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (o *output) copy(i int) {
	defer o.wg.Done()
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf, sc, f := *bp, &o.stream[i], o.files[i]
	for {
		n, err := o.rd[i].Read(buf)
		if n > 0 {
			keep := o.take(int64(n))
			if keep > 0 && sc.err == nil {
				w, werr := f.Write(buf[:keep])
				if w > 0 {
					sc.last = buf[w-1]
				}
				if werr != nil {
					sc.err = werr
				}
				keep = int64(w)
			}
			sc.dropped += int64(n) - keep
		}
		if err != nil {
			return // io.EOF: every writer is gone; or the pipe was closed by finish
		}
	}
}

// take reserves up to n bytes of the budget and returns how many it got.
func (o *output) take(n int64) int64 {
	for {
		left := o.left.Load()
		if left <= 0 {
			return 0
		}
		k := min(n, left)
		if o.left.CompareAndSwap(left, left-k) {
			return k
		}
	}
}

// finish waits for the copies to drain (at most outputDrain after the
// handler exited), appends the notes of dropped output, syncs the files,
// and returns how many bytes were dropped in all. The files stay open
// (stderr's tail is read afterwards); close closes them.
func (o *output) finish() int64 {
	if o.max > 0 {
		done := make(chan struct{})
		go func() { o.wg.Wait(); close(done) }()
		t := time.NewTimer(outputDrain)
		select {
		case <-done:
			t.Stop()
		case <-t.C:
			// Something the handler left running holds the pipes: stop
			// reading (it gets EPIPE from now on).
			for _, r := range o.rd {
				r.Close()
			}
			<-done
		}
	}
	var total int64
	for i, s := range streams {
		sc := &o.stream[i]
		total += sc.dropped
		if sc.dropped > 0 {
			lead := ""
			if sc.last != '\n' && sc.last != 0 {
				lead = "\n"
			}
			why := fmt.Sprintf("output cap of %d bytes (stdout and stderr together, agentd --output-max) reached", o.max)
			if sc.err != nil {
				why = "cannot write: " + sc.err.Error()
			}
			_, _ = fmt.Fprintf(o.files[i], "%s[farro: %s: %d bytes of %s dropped]\n", lead, why, sc.dropped, s)
		}
		_ = o.files[i].Sync()
	}
	return total
}

func (o *output) close() {
	for i := range streams {
		for _, f := range []*os.File{o.files[i], o.rd[i], o.wr[i]} {
			if f != nil {
				_ = f.Close()
			}
		}
	}
}

// ParseSize reads a byte count: a number with an optional unit B, KiB,
// MiB, GiB, TiB (powers of 1024; K, M, G, T, KB, MB, GB, TB are read the
// same way). 0 means unlimited where a cap is asked for.
func ParseSize(s string) (int64, error) {
	num, unit := s, ""
	for i, r := range s {
		if r < '0' || r > '9' {
			num, unit = s[:i], s[i:]
			break
		}
	}
	if num == "" {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (64KiB, 16MiB, 1GiB; 0 for no limit)", s)
	}
	var n int64
	for _, r := range num {
		if n > (1<<62)/10 {
			return 0, fmt.Errorf("size %q: too large", s)
		}
		n = n*10 + int64(r-'0')
	}
	shift := -1
	switch unit {
	case "", "B":
		shift = 0
	case "K", "KB", "KiB":
		shift = 10
	case "M", "MB", "MiB":
		shift = 20
	case "G", "GB", "GiB":
		shift = 30
	case "T", "TB", "TiB":
		shift = 40
	}
	if shift < 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB, GiB or TiB)", s, unit)
	}
	if n > (1<<62)>>shift {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n << shift, nil
}
