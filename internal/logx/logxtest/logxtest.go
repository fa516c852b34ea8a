// Package logxtest captures the JSON log lines of a daemon under test and
// checks them strictly: one JSON object per line, and no key twice in any
// object at any depth (jq keeps the last of two equal keys without a word;
// Elasticsearch rejects the whole document).
package logxtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
)

// Buffer is an io.Writer for a logger, safe for the daemon's goroutines.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// New returns a Buffer whose every line is checked with CheckLine when t
// ends (after the test's other cleanups registered later, so after the
// daemon under test stopped if its stop was registered after New): a line
// that fails makes t fail. Tests that capture logs should get their
// buffer here, so that no line a test produces escapes the check.
func New(t testing.TB) *Buffer {
	b := &Buffer{}
	t.Cleanup(func() { b.Check(t) })
	return b
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Check reports, as errors of t, every line written so far that fails
// CheckLine.
func (b *Buffer) Check(t testing.TB) {
	t.Helper()
	_, problems := Scan([]byte(b.String()))
	for i, p := range problems {
		if i == 10 {
			t.Errorf("... and %d more bad log lines", len(problems)-i)
			break
		}
		t.Errorf("log line %d: %v: %s", p.Line, p.Err, p.Text)
	}
}

// Lines returns the lines written so far, decoded as JSON objects. A line
// that fails CheckLine (not one JSON object, or a key twice at any depth)
// fails t.
func (b *Buffer) Lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader([]byte(b.String())))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if err := CheckLine(sc.Bytes()); err != nil {
			t.Fatalf("log line: %v: %s", err, sc.Text())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// DuplicateKeyError is CheckLine's error for a key found twice in one
// object.
type DuplicateKeyError struct {
	// Path names the repeated key from the top of the line: "job_id",
	// "event.type", "list[2].name".
	Path string
}

func (e *DuplicateKeyError) Error() string { return fmt.Sprintf("key %q twice", e.Path) }

// CheckLine returns nil if line (without its newline) is exactly one JSON
// object in which no object, at any depth, has a key twice. It walks the
// decoder's token stream, since decoding into a map silently keeps the
// last of two equal keys.
func CheckLine(line []byte) error {
	if !json.Valid(line) {
		return errors.New("not JSON")
	}
	if t := bytes.TrimLeft(line, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := walk(dec, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// walk consumes one value from dec, checking the keys of every object in
// it; path is the value's place in the line.
func walk(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, ok := kt.(string)
			if !ok {
				return fmt.Errorf("key %v is not a string", kt)
			}
			p := k
			if path != "" {
				p = path + "." + k
			}
			if seen[k] {
				return &DuplicateKeyError{Path: p}
			}
			seen[k] = true
			if err := walk(dec, p); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walk(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// DuplicateKey returns the path of a key that occurs twice in one object
// of the JSON line, at any depth ("" if none, or if the line is not JSON).
func DuplicateKey(line []byte) string {
	var dup *DuplicateKeyError
	if errors.As(CheckLine(line), &dup) {
		return dup.Path
	}
	return ""
}

// Problem is a line that failed CheckLine.
type Problem struct {
	Line int // from 1
	Text string
	Err  error
}

// Scan checks every line of data (JSON lines; an empty last line is not
// a line) and returns how many lines there were and the ones that failed.
func Scan(data []byte) (lines int, problems []Problem) {
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		lines++
		if err := CheckLine(line); err != nil {
			problems = append(problems, Problem{Line: lines, Text: string(line), Err: err})
		}
	}
	return lines, problems
}
