package logx

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/rs/zerolog"
)

// Syslog priorities (RFC 5424 severities) as journald reads them.
const (
	prioEmerg   = 0
	prioCrit    = 2
	prioErr     = 3
	prioWarning = 4
	prioInfo    = 6
	prioDebug   = 7
)

// Priority maps a zerolog level to the syslog priority journald stores
// with the line: panic 0 (emerg), fatal 2 (crit), error 3 (err), warn 4
// (warning), info and lines without a level 6 (info), debug and trace 7
// (debug).
func Priority(l zerolog.Level) int {
	switch l {
	case zerolog.PanicLevel:
		return prioEmerg
	case zerolog.FatalLevel:
		return prioCrit
	case zerolog.ErrorLevel:
		return prioErr
	case zerolog.WarnLevel:
		return prioWarning
	case zerolog.DebugLevel, zerolog.TraceLevel:
		return prioDebug
	}
	return prioInfo
}

// JournalWriter prefixes every line with "<N>", N being the syslog
// priority of the line's level. systemd's journal, reading a service's
// stdout (SyslogLevelPrefix=yes, the default), strips the prefix and
// stores N as the entry's PRIORITY: `journalctl -p warning` then works,
// and `journalctl -o cat` still shows the bare JSON line.
type JournalWriter struct{ W io.Writer }

// Write writes a line of unknown level (info).
func (j JournalWriter) Write(p []byte) (int, error) {
	return j.WriteLevel(zerolog.NoLevel, p)
}

// WriteLevel writes p, one JSON line, behind its priority prefix; it
// reports len(p) bytes written, as zerolog expects.
func (j JournalWriter) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	buf := make([]byte, 0, len(p)+3)
	buf = append(buf, '<', byte('0'+Priority(l)), '>')
	buf = append(buf, p...)
	if _, err := j.W.Write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// StreamIsJournal reports whether f is the stream systemd connected to the
// journal: JOURNAL_STREAM (set by systemd for services whose stdout or
// stderr goes to the journal) holds "DEV:INODE" of that stream, which must
// match f's. A descriptor inherited by a child process whose output is
// redirected elsewhere does not match, so its lines stay unprefixed.
func StreamIsJournal(f *os.File) bool {
	return streamMatches(os.Getenv("JOURNAL_STREAM"), f)
}

func streamMatches(env string, f *os.File) bool {
	if env == "" || f == nil {
		return false
	}
	devS, inoS, ok := strings.Cut(env, ":")
	if !ok {
		return false
	}
	var dev, ino uint64
	if _, err := fmt.Sscan(devS, &dev); err != nil {
		return false
	}
	if _, err := fmt.Sscan(inoS, &ino); err != nil {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return uint64(st.Dev) == dev && uint64(st.Ino) == ino
}

// ForJournal returns w wrapped in a JournalWriter when w is a file that
// systemd connected to the journal, and w itself otherwise.
func ForJournal(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && StreamIsJournal(f) {
		return JournalWriter{W: f}
	}
	return w
}
