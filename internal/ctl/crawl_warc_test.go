package ctl_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/fetch"
	"github.com/farro-dev/farro/pkg/job"
)

// warcio installs webrecorder's warcio (npm) into a temporary directory:
// the independent WARC reader of the export tests.
func warcio(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing: CI installs it (.ci/run)", tool)
			}
			t.Skipf("no %s", tool)
		}
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", dir, "warcio@2")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install warcio: %v\n%s", err, out)
	}
	return dir
}

// warcioScript prints one JSON line per record of the files given, read
// with warcio: the WARC headers, the HTTP status and the SHA-256 of the
// payload (the HTTP body, decoded).
const warcioScript = `
import { WARCParser } from 'warcio';
import fs from 'node:fs';
import crypto from 'node:crypto';
for (const file of process.argv.slice(2)) {
  const parser = new WARCParser(fs.createReadStream(file));
  let first = true;
  for await (const rec of parser) {
    const payload = await rec.readFully(true);
    const h = Object.fromEntries(rec.warcHeaders.headers);
    const out = { file, first, type: rec.warcType, uri: rec.warcTargetURI, headers: h,
      status: rec.httpHeaders ? Number(rec.httpHeaders.statusCode) : 0,
      http: rec.httpHeaders ? Object.fromEntries(rec.httpHeaders.headers) : null,
      sha256: crypto.createHash('sha256').update(payload).digest('hex'),
      text: rec.warcType === 'metadata' || rec.warcType === 'request' || rec.warcType === 'warcinfo' ? Buffer.from(payload).toString() : '' };
    first = false;
    console.log(JSON.stringify(out));
  }
}
`

type warcRec struct {
	File    string            `json:"file"`
	First   bool              `json:"first"`
	Type    string            `json:"type"`
	URI     string            `json:"uri"`
	Headers map[string]string `json:"headers"`
	Status  int               `json:"status"`
	HTTP    map[string]string `json:"http"`
	SHA256  string            `json:"sha256"`
	Text    string            `json:"text"`
}

func readWARC(t *testing.T, warcioDir string, files []string) []warcRec {
	t.Helper()
	script := filepath.Join(warcioDir, "read.mjs")
	if err := os.WriteFile(script, []byte(warcioScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, files...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("warcio could not read the export: %v\n%s", err, stderr.String())
	}
	var recs []warcRec
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r warcRec
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestCrawlExportWARC fetches pages from a loopback server with the real
// crawl.fetch handler, exports the crawl as WARC and reads it back with
// warcio: request/response pairs, a revisit for a 304, metadata records
// with the outcome (a robots-denied URL included), a warcinfo record at the
// head of every file, rotation at --warc-max-size, and a response payload
// equal to the bytes the server sent.
func TestCrawlExportWARC(t *testing.T) {
	wio := warcio(t)
	page := []byte(`<html><a href="/x">x</a>` + strings.Repeat("p", 1500) + `</html>`)
	zipped := []byte(`<html><a href="/zipped">z</a>` + strings.Repeat("z", 800) + `</html>`)
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("ETag", `"v1"`)
		w.Write(page)
	})
	mux.HandleFunc("/gz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write(zipped)
		zw.Close()
	})
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) { w.Write(page) })
	mux.HandleFunc("/cond", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write(page)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	host := "site.test:" + port

	e := newEnv(t)
	st, _ := crawl.Open(e.s, "w")
	cr := crawl.New("w")
	cr.Seeds = []crawl.Seed{{URL: "http://" + host + "/page"}}
	if err := cr.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(cr); err != nil {
		t.Fatal(err)
	}
	h := fetch.NewHandler(e.s, nil)
	var outcomes bytes.Buffer
	run := func(path string, mutate func(*crawl.FetchPrompt)) *crawl.Artifact {
		t.Helper()
		p := crawl.FetchPrompt{Crawl: "w", URL: "http://" + host + path, Domain: host, UserAgent: "farro-test/1.0",
			TimeoutMS: 5000, ConnectTimeoutMS: 2000, MaxBodyBytes: 1 << 20, AllowPrivate: true, Resolve: map[string]string{host: "127.0.0.1"}}
		if mutate != nil {
			mutate(&p)
		}
		id := crawl.FetchJobID("w", p.URL)
		dir := e.s.JobDir(job.Succeeded, "", id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		if res := h.Run(context.Background(), agent.Task{Env: job.Envelope{Prompt: b, Lifecycle: &job.Job{ID: id, Attempts: 1}, Runtime: job.Runtime{Dir: dir}}}); res.Err != nil {
			t.Fatalf("fetch %s: %v", path, res.Err)
		}
		var a crawl.Artifact
		if err := crawl.ReadResult(dir, &a); err != nil {
			t.Fatal(err)
		}
		fa := a.FetchedAt
		o := crawl.Outcome{Time: time.Now(), URL: p.URL, Domain: host, JobID: id, Outcome: a.Outcome, HTTPStatus: a.HTTPStatus, FetchedAt: &fa, SHA256: a.SHA256, Unchanged: a.Unchanged}
		json.NewEncoder(&outcomes).Encode(o)
		return &a
	}
	pa := run("/page", nil)
	run("/gz", nil)
	if a := run("/cond", func(p *crawl.FetchPrompt) { p.IfNoneMatch, p.PrevSHA256 = `"v1"`, pa.SHA256 }); !a.Unchanged || a.HTTPStatus != 304 {
		t.Fatalf("/cond: %+v", a)
	}
	if a := run("/same", func(p *crawl.FetchPrompt) { p.PrevSHA256 = pa.SHA256 }); !a.Unchanged || a.HTTPStatus != 200 {
		t.Fatalf("/same: %+v", a)
	}
	denied := "http://" + host + "/private/"
	json.NewEncoder(&outcomes).Encode(crawl.Outcome{Time: time.Now(), URL: denied, Domain: host, Outcome: crawl.OutcomeRobotsDenied, Detail: "Disallow: /private/"})
	if err := os.WriteFile(st.Path(crawl.OutcomesFile), outcomes.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "warc")
	if err := e.ctl("").CrawlExportWARC("w", ctl.CrawlExportWARCOptions{Dir: out, MaxSize: 1500}); err != nil {
		t.Fatalf("export: %v\n%s", err, e.stderr)
	}
	lines := strings.Split(strings.TrimSpace(e.stdout.String()), "\n")
	files := lines[:len(lines)-1]
	if len(files) < 2 || !strings.HasPrefix(lines[len(lines)-1], "5 URLs, ") {
		t.Fatalf("want rotation into several files and a summary of 4 URLs, got:\n%s", e.stdout)
	}
	for _, f := range files {
		if !strings.HasPrefix(filepath.Base(f), "w-") || !strings.HasSuffix(f, ".warc.gz") || filepath.Dir(f) != out {
			t.Errorf("file name %s", f)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(out, ".warc-*")); len(left) != 0 {
		t.Errorf("staging left behind: %v", left)
	}

	recs := readWARC(t, wio, files)
	byType := map[string][]warcRec{}
	perFile := map[string]int{}
	for _, r := range recs {
		if r.Headers["warc-type"] == "" || r.Headers["warc-record-id"] == "" || r.Headers["warc-date"] == "" {
			t.Errorf("record without the mandatory fields: %+v", r.Headers)
		}
		if r.First != (r.Type == "warcinfo") {
			t.Errorf("%s: %s record first=%v: a warcinfo record heads each file, only there", r.File, r.Type, r.First)
		}
		if r.Type != "warcinfo" && r.Headers["warc-warcinfo-id"] == "" {
			t.Errorf("%s record without WARC-Warcinfo-ID", r.Type)
		}
		perFile[r.File]++
		byType[r.Type] = append(byType[r.Type], r)
	}
	if len(perFile) != len(files) || len(byType["warcinfo"]) != len(files) {
		t.Errorf("%d files, %d read, %d warcinfo records", len(files), len(perFile), len(byType["warcinfo"]))
	}
	if n := len(byType["request"]); n != 4 {
		t.Errorf("%d request records, want 4 (one per fetch)", n)
	}
	if n := len(byType["response"]); n != 2 {
		t.Errorf("%d response records, want 2", n)
	}
	if n := len(byType["metadata"]); n != 5 {
		t.Errorf("%d metadata records, want 5 (one per URL)", n)
	}
	served := map[string]string{"http://" + host + "/page": sha(page), "http://" + host + "/gz": sha(zipped)}
	for _, r := range byType["response"] {
		if r.Status != 200 || r.SHA256 != served[r.URI] {
			t.Errorf("response %s: status %d, payload sha256 %s, the server sent %s", r.URI, r.Status, r.SHA256, served[r.URI])
		}
		if r.Headers["warc-concurrent-to"] == "" {
			t.Errorf("response %s not linked to its request", r.URI)
		}
	}
	for _, r := range byType["request"] {
		if r.HTTP["user-agent"] != "farro-test/1.0" || r.HTTP["host"] != host || r.HTTP["accept-encoding"] != "gzip" {
			t.Errorf("request record %s without the headers sent: %q", r.URI, r.HTTP)
		}
	}
	if rv := byType["revisit"]; len(rv) != 2 || rv[0].URI != "http://"+host+"/cond" || rv[0].Status != 304 ||
		rv[0].Headers["warc-profile"] != "http://netpreserve.org/warc/1.1/revisit/server-not-modified" || rv[0].Headers["warc-refers-to"] != "" ||
		rv[1].URI != "http://"+host+"/same" || rv[1].Status != 200 || rv[1].Headers["warc-profile"] != "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest" ||
		rv[1].Headers["warc-refers-to-target-uri"] != "http://"+host+"/page" || rv[1].Headers["warc-payload-digest"] != payloadDigest(page) {
		t.Errorf("revisit records: %+v", rv)
	}
	var sawDenied, sawGzip bool
	for _, r := range byType["metadata"] {
		if r.URI == denied && strings.Contains(r.Text, "outcome: robots_denied") && strings.Contains(r.Text, "Disallow: /private/") {
			sawDenied = true
		}
		if strings.HasSuffix(r.URI, "/gz") && strings.Contains(r.Text, "decoded-content-encoding: gzip") && strings.Contains(r.Text, "outlink: http://"+host+"/zipped") {
			sawGzip = true
		}
	}
	if !sawDenied || !sawGzip {
		t.Errorf("metadata: robots-denied URL %v, gzip page's outcome and links %v", sawDenied, sawGzip)
	}
}

func payloadDigest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + base32.StdEncoding.EncodeToString(s[:])
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestCrawlExportWARCErrors: a body gone from bodies/ is reported in
// one line and the export goes on (the URL keeps its request and metadata
// records, nothing else is lost), and a bad directory is a clear error.
func TestCrawlExportWARCErrors(t *testing.T) {
	e := newEnv(t)
	st, _ := crawl.Open(e.s, "m")
	cr := crawl.New("m")
	cr.Seeds = []crawl.Seed{{URL: "http://a.test/"}}
	_ = cr.Validate()
	if err := st.Create(cr); err != nil {
		t.Fatal(err)
	}
	id := crawl.FetchJobID("m", "http://a.test/")
	dir := e.s.JobDir(job.Succeeded, "", id)
	os.MkdirAll(dir, 0o755)
	sum := strings.Repeat("ab", 32)
	a := crawl.Artifact{Kind: crawl.KindFetch, Crawl: "m", JobID: id, NormalizedURL: "http://a.test/", FinalURL: "http://a.test/", Outcome: crawl.OutcomeFetched,
		HTTPStatus: 200, BodyBytes: 5, SHA256: sum, FetchedAt: time.Now().UTC(),
		Exchange: &crawl.Exchange{RequestLine: "GET / HTTP/1.1", RequestHeaders: []string{"Host: a.test"}, StatusLine: "HTTP/1.1 200 OK", ResponseHeaders: []string{"Content-Type: text/plain"}}}
	if err := crawl.WriteResult(dir, &a); err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(crawl.Outcome{URL: a.NormalizedURL, JobID: id, Outcome: crawl.OutcomeFetched, HTTPStatus: 200, SHA256: sum})
	// A URL whose job retention removed: its body becomes a resource record.
	kept := []byte("kept body")
	if err := st.PutBody(sha(kept), kept); err != nil {
		t.Fatal(err)
	}
	line2, _ := json.Marshal(crawl.Outcome{URL: "http://a.test/old", JobID: crawl.FetchJobID("m", "http://a.test/old"), Outcome: crawl.OutcomeFetched, HTTPStatus: 200, SHA256: sha(kept)})
	os.WriteFile(st.Path(crawl.OutcomesFile), append(append(append(line, '\n'), line2...), '\n'), 0o644)

	out := filepath.Join(t.TempDir(), "warc")
	err := e.ctl("").CrawlExportWARC("m", ctl.CrawlExportWARCOptions{Dir: out})
	if err == nil || !strings.Contains(err.Error(), "1 URLs exported without their body") {
		t.Errorf("missing body: %v", err)
	}
	if !strings.Contains(e.stderr.String(), "http://a.test/: body") || strings.Count(e.stderr.String(), "\n") != 1 {
		t.Errorf("stderr: %q", e.stderr)
	}
	if !strings.Contains(e.stdout.String(), "2 URLs, 5 records, 1 files") {
		t.Errorf("stdout: %q", e.stdout)
	}

	// The body as recorded but its file replaced by a FIFO: refused, not read.
	p := st.BodyPath(sum)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.ctl("").CrawlExportWARC("m", ctl.CrawlExportWARCOptions{Dir: out}) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO body was exported")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("export blocked on a FIFO body")
	}

	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o644)
	if err := e.ctl("").CrawlExportWARC("m", ctl.CrawlExportWARCOptions{Dir: notDir}); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("a file as the directory: %v", err)
	}
	if err := e.ctl("").CrawlExportWARC("nope", ctl.CrawlExportWARCOptions{Dir: out}); err == nil {
		t.Error("unknown crawl exported")
	}
}
