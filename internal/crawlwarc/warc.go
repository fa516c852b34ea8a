// Package crawlwarc writes a crawl's fetches as WARC/1.1 files (gzip per
// record, rotated at a size), with github.com/nlnwa/gowarc. It reads
// nothing itself: farroctl's `crawl export --warc` hands it each URL's
// artifact and body from the spool (docs/CRAWL.md, "WARC").
//
// Crash safety: files are written in a staging directory inside the
// target, fsynced, then linked into the target under their final names
// (an existing file is never replaced) and the target fsynced; a killed
// export leaves only its staging directory (".warc-*"), never a torn file
// under a final name.
package crawlwarc

import (
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/nlnwa/gowarc"
)

// DefaultMaxSize is the size at which a WARC file is closed and the next
// one started (--warc-max-size).
const DefaultMaxSize = 1 << 30

// Revisit profiles (WARC/1.1 §6.7).
const (
	ProfileNotModified = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
	ProfileIdentical   = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
)

// Writer writes one export's WARC files.
type Writer struct {
	dir, stage string
	crawl      string
	w          *gowarc.WarcFileWriter
	closed     bool
	// responses written so far by body hash: an identical-payload revisit
	// refers to the first.
	seen    map[string]ref
	Records int
}

type ref struct{ id, uri, date string }

// Options of Create.
type Options struct {
	Crawl    string            // the crawl's name: file names start with it
	MaxSize  int64             // rotate at this many bytes (0: DefaultMaxSize)
	Info     map[string]string // extra warcinfo fields (software, crawl settings)
	Software string            // warcinfo "software"
}

type namer struct {
	dir, prefix, ts string
	serial          atomic.Int32
}

func (n *namer) NewWarcfileName() (string, string) {
	return n.dir, fmt.Sprintf("%s-%s-%05d.warc", n.prefix, n.ts, n.serial.Add(1))
}

// Create starts an export into dir (created if missing).
func Create(dir string, o Options) (*Writer, error) {
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	if err := fsq.MkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("warc directory: %w", err)
	}
	stage, err := os.MkdirTemp(dir, ".warc-")
	if err != nil {
		return nil, fmt.Errorf("warc directory: %w", err)
	}
	nm := &namer{dir: stage, prefix: o.Crawl, ts: time.Now().UTC().Format("20060102150405")}
	info := func(rb gowarc.WarcRecordBuilder) error {
		fields := map[string]string{"format": "WARC File Format 1.1", "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
			"software": o.Software, "isPartOf": o.Crawl}
		for k, v := range o.Info {
			fields[k] = v
		}
		_, err := rb.WriteString(warcFields(fields))
		return err
	}
	w := gowarc.NewWarcFileWriter(
		gowarc.WithFileNameGenerator(nm),
		gowarc.WithMaxFileSize(o.MaxSize),
		gowarc.WithCompression(true), // a gzip member per record
		gowarc.WithOpenFileSuffix(""),
		gowarc.WithWarcInfoFunc(info),
		gowarc.WithAddWarcConcurrentToHeader(true),
	)
	return &Writer{dir: dir, stage: stage, crawl: o.Crawl, w: w, seen: map[string]ref{}}, nil
}

func warcFields(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\r\n", k, oneLine(m[k]))
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// Body is a stored response body: its reader and its length.
type Body struct {
	R    io.Reader
	Size int64
}

// Add writes a's records: request and response (or revisit when the
// fetch was unchanged) when a holds the exchange, a resource record of
// the body when it does not (an artifact from before exchanges were
// kept), and always a metadata record with the crawl's outcome for the
// URL. body is nil when there is none (or it is missing from bodies/).
func (w *Writer) Add(a *crawl.Artifact, body *Body) error {
	date := a.FetchedAt
	if date.IsZero() {
		date = time.Now()
	}
	uri := a.FinalURL
	if uri == "" {
		uri = a.NormalizedURL
	}
	var recs []gowarc.WarcRecord
	defer func() {
		for _, r := range recs {
			r.Close()
		}
	}()
	build := func(t gowarc.RecordType, ct string, fill func(rb gowarc.WarcRecordBuilder) error) error {
		rb := gowarc.NewRecordBuilder(t)
		rb.AddWarcHeader(gowarc.WarcTargetURI, uri)
		rb.AddWarcHeaderTime(gowarc.WarcDate, date)
		rb.AddWarcHeader(gowarc.ContentType, ct)
		if err := fill(rb); err != nil {
			rb.Close()
			return err
		}
		r, _, err := rb.Build()
		if err != nil {
			return fmt.Errorf("warc record for %s: %w", uri, err)
		}
		recs = append(recs, r)
		return nil
	}
	x := a.Exchange
	var main gowarc.WarcRecord
	switch {
	case x != nil && a.HTTPStatus > 0:
		if err := build(gowarc.Request, "application/http;msgtype=request", func(rb gowarc.WarcRecordBuilder) error {
			_, err := rb.WriteString(x.RequestLine + "\r\n" + lines(x.RequestHeaders) + "\r\n")
			return err
		}); err != nil {
			return err
		}
		head := x.StatusLine + "\r\n" + lines(x.ResponseHeaders) + "\r\n"
		if a.Unchanged {
			if err := build(gowarc.Revisit, "application/http;msgtype=response", func(rb gowarc.WarcRecordBuilder) error {
				if a.HTTPStatus == 304 {
					rb.AddWarcHeader(gowarc.WarcProfile, ProfileNotModified)
				} else {
					rb.AddWarcHeader(gowarc.WarcProfile, ProfileIdentical)
				}
				if d := payloadDigest(a.SHA256); d != "" {
					rb.AddWarcHeader(gowarc.WarcPayloadDigest, d)
				}
				// The capture it revisits: the first response with this
				// body (for a 304, of this URL).
				if r, ok := w.seen[a.SHA256]; ok && a.SHA256 != "" && (a.HTTPStatus != 304 || r.uri == uri) {
					rb.AddWarcHeader(gowarc.WarcRefersTo, r.id)
					rb.AddWarcHeader(gowarc.WarcRefersToTargetURI, r.uri)
					rb.AddWarcHeader(gowarc.WarcRefersToDate, r.date)
				}
				_, err := rb.WriteString(head)
				return err
			}); err != nil {
				return err
			}
			break
		}
		if err := build(gowarc.Response, "application/http;msgtype=response", func(rb gowarc.WarcRecordBuilder) error {
			switch {
			case body == nil && a.BodyBytes > 0: // the stored body is gone
				rb.AddWarcHeader(gowarc.WarcTruncated, "unspecified")
			case a.Truncated:
				rb.AddWarcHeader(gowarc.WarcTruncated, "length")
			}
			if _, err := rb.WriteString(head); err != nil {
				return err
			}
			if body != nil {
				if _, err := io.Copy(rb, io.LimitReader(body.R, body.Size)); err != nil {
					return fmt.Errorf("body of %s: %w", uri, err)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		main = recs[len(recs)-1]
	case body != nil:
		ct := a.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		if err := build(gowarc.Resource, ct, func(rb gowarc.WarcRecordBuilder) error {
			if a.Truncated {
				rb.AddWarcHeader(gowarc.WarcTruncated, "length")
			}
			_, err := io.Copy(rb, io.LimitReader(body.R, body.Size))
			return err
		}); err != nil {
			return err
		}
	}
	if err := build(gowarc.Metadata, "application/warc-fields", func(rb gowarc.WarcRecordBuilder) error {
		_, err := rb.WriteString(metadata(a, x))
		return err
	}); err != nil {
		return err
	}
	if w.closed {
		return errors.New("write warc: writer closed")
	}
	for _, res := range w.w.Write(recs...) {
		if res.Err != nil {
			return fmt.Errorf("write warc: %w", res.Err)
		}
	}
	w.Records += len(recs)
	if main != nil && a.SHA256 != "" {
		if _, ok := w.seen[a.SHA256]; !ok {
			w.seen[a.SHA256] = ref{main.WarcHeader().Get(gowarc.WarcRecordID), uri, main.WarcHeader().Get(gowarc.WarcDate)}
		}
	}
	return nil
}

func lines(ls []string) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(oneLine(l))
		b.WriteString("\r\n")
	}
	return b.String()
}

// payloadDigest turns a hex SHA-256 into WARC's "sha256:BASE32".
func payloadDigest(hexSHA string) string {
	b, err := hex.DecodeString(hexSHA)
	if err != nil || len(b) != 32 {
		return ""
	}
	return "sha256:" + base32.StdEncoding.EncodeToString(b)
}

// metadata is the warc-fields block of a URL's metadata record: the
// crawl's outcome and what the fetch found.
func metadata(a *crawl.Artifact, x *crawl.Exchange) string {
	var b strings.Builder
	f := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s: %s\r\n", k, oneLine(v))
		}
	}
	f("crawl", a.Crawl)
	f("job-id", a.JobID)
	f("normalized-url", a.NormalizedURL)
	f("domain", a.Domain)
	f("outcome", a.Outcome)
	f("http-status", strconv.Itoa(a.HTTPStatus))
	f("depth", strconv.Itoa(a.Depth))
	if a.Hops > 0 {
		f("hops", strconv.Itoa(a.Hops))
	}
	if a.Attempt > 0 {
		f("attempt", strconv.Itoa(a.Attempt))
	}
	if !a.FetchedAt.IsZero() {
		f("fetched-at", a.FetchedAt.UTC().Format(time.RFC3339Nano))
		f("duration-ms", strconv.FormatInt(a.DurationMS, 10))
	}
	f("sha256", a.SHA256)
	if a.Round > 0 {
		f("round", strconv.Itoa(a.Round))
	}
	if a.Unchanged {
		f("unchanged", "true")
	}
	if a.Truncated {
		f("truncated", "true")
	}
	f("redirect-to", a.RedirectTo)
	if a.RetryAfter > 0 {
		f("retry-after-s", strconv.FormatFloat(a.RetryAfter, 'f', -1, 64))
	}
	f("error-code", a.ErrorCode)
	f("error", a.Error)
	if x != nil {
		f("decoded-content-encoding", x.DecodedEncoding)
		if x.HeadersTruncated {
			f("headers-truncated", "true")
		}
	}
	for _, l := range a.Links {
		f("outlink", l)
	}
	return b.String()
}

// Close finishes the export: the files are closed, fsynced and linked
// into the target directory, which is fsynced; it returns their names.
func (w *Writer) Close() ([]string, error) {
	if w.closed {
		return nil, nil
	}
	w.closed = true
	w.w.Close()
	defer os.RemoveAll(w.stage)
	names, err := os.ReadDir(w.stage)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range names {
		p := filepath.Join(w.stage, e.Name())
		f, err := os.Open(p)
		if err != nil {
			return out, err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return out, fmt.Errorf("sync %s: %w", p, err)
		}
	}
	for _, e := range names {
		dst := filepath.Join(w.dir, e.Name())
		if err := os.Link(filepath.Join(w.stage, e.Name()), dst); err != nil {
			return out, fmt.Errorf("warc file: %w", err)
		}
		out = append(out, dst)
	}
	if err := fsq.SyncDir(w.dir); err != nil {
		return out, err
	}
	return out, nil
}

// Abort drops an unfinished export (its staging directory).
func (w *Writer) Abort() {
	if !w.closed {
		w.closed = true
		w.w.Close()
	}
	os.RemoveAll(w.stage)
}
