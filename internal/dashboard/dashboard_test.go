package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

const testToken = "0123456789abcdef0123456789abcdef"

// fixture is a spool and a dashboard server over it.
type fixture struct {
	t   *testing.T
	s   *job.Spool
	srv *Server
}

func newFixture(t *testing.T, actions bool) *fixture {
	t.Helper()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Ctl: &ctl.Ctl{Root: s.Root, Stdout: io.Discard, Stderr: io.Discard}, Actions: actions, PageSize: 10, ShapeWait: 5 * time.Second}
	if actions {
		cfg.Token = testToken
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, s: s, srv: srv}
}

func (f *fixture) submit(id string, mod func(*job.SubmitRequest)) {
	f.t.Helper()
	req := job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{"n":1}`), Actor: "test"}
	if mod != nil {
		mod(&req)
	}
	if _, err := f.s.Submit(req); err != nil {
		f.t.Fatalf("submit %s: %v", id, err)
	}
}

func (f *fixture) where(id string) job.State {
	f.t.Helper()
	l, err := f.s.Locate(id)
	if err != nil {
		f.t.Fatalf("locate %s: %v", id, err)
	}
	return l[0].State
}

// do serves one request and returns the status and body.
func (f *fixture) do(r *http.Request) (int, string) {
	f.t.Helper()
	if r.Host == "" || r.Host == "example.com" {
		r.Host = "127.0.0.1:8080"
	}
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func (f *fixture) get(path string) (int, string) {
	return f.do(httptest.NewRequest(http.MethodGet, path, nil))
}

func post(path string, form url.Values, cookie bool) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie {
		r.AddCookie(&http.Cookie{Name: CookieName, Value: testToken})
	}
	return r
}

// A reason, an ID and a kind planted by anyone are shown as text on every
// page, never as markup.
func TestHostileTextIsEscaped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	f.submit("evil", func(r *job.SubmitRequest) { r.Held = true })
	hostile := `<script>alert("x")</script><img src=x onerror=alert(1)>`
	if _, err := f.s.Move("evil", job.Held, job.Killed, "test", hostile, nil); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/jobs", "/jobs?state=killed", "/jobs/evil", "/jobs?q=" + url.QueryEscape("<script>")} {
		code, body := f.get(path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, body)
		}
		if strings.Contains(body, "<script") || strings.Contains(body, "<img") {
			t.Errorf("GET %s: hostile markup rendered as is", path)
		}
	}
	_, body := f.get("/jobs/evil")
	if !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Errorf("job page does not show the reason escaped:\n%s", body)
	}
	// An ID that is not a valid ID is refused, and echoed escaped.
	code, body := f.get("/jobs/" + url.PathEscape("<script>x"))
	if code != http.StatusBadRequest || strings.Contains(body, "<script>x") {
		t.Errorf("hostile ID: %d\n%s", code, body)
	}
	// A crawl why question is echoed escaped too (the crawl does not exist).
	code, body = f.get("/crawls/nope?url=" + url.QueryEscape("<script>"))
	if code == http.StatusOK || strings.Contains(body, "<script>") {
		t.Errorf("unknown crawl: %d\n%s", code, body)
	}
}

// No action without the token in both the cookie and the form, from this
// origin; nothing is touched when refused. With both, the job moves.
func TestActionGuard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	f.submit("j1", nil)
	tok := url.Values{"token": {testToken}}
	refused := []struct {
		name string
		req  *http.Request
	}{
		{"no token", post("/jobs/j1/hold", url.Values{}, false)},
		{"form token without cookie", post("/jobs/j1/hold", tok, false)},
		{"cookie without form token", post("/jobs/j1/hold", url.Values{}, true)},
		{"wrong token", post("/jobs/j1/hold", url.Values{"token": {strings.Repeat("f", 32)}}, true)},
		{"other origin", func() *http.Request {
			r := post("/jobs/j1/hold", tok, true)
			r.Header.Set("Origin", "http://evil.example")
			return r
		}()},
		{"cross-site fetch", func() *http.Request {
			r := post("/jobs/j1/hold", tok, true)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			return r
		}()},
	}
	for _, c := range refused {
		code, body := f.do(c.req)
		if code != http.StatusForbidden || !strings.Contains(body, "refused") {
			t.Errorf("%s: %d, want 403 refused\n%s", c.name, code, body)
		}
		if st := f.where("j1"); st != job.Queued {
			t.Fatalf("%s: the job moved to %s", c.name, st)
		}
	}
	// GET never acts: the action URL has no GET, and login by GET sets nothing.
	if code, _ := f.get("/jobs/j1/hold?token=" + testToken); code != http.StatusMethodNotAllowed {
		t.Errorf("GET of an action: %d, want 405", code)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/login?token="+testToken, nil)
	r.Host = "127.0.0.1"
	f.srv.ServeHTTP(w, r)
	if len(w.Result().Cookies()) != 0 {
		t.Errorf("GET /login set a cookie")
	}
	if st := f.where("j1"); st != job.Queued {
		t.Fatalf("a GET moved the job to %s", st)
	}
	// Without the cookie the page offers no token; with it, it does.
	if _, body := f.get("/jobs/j1"); strings.Contains(body, testToken) || !strings.Contains(body, `id="need-token"`) {
		t.Errorf("job page without the cookie shows the token or no login hint")
	}
	rq := httptest.NewRequest(http.MethodGet, "/jobs/j1", nil)
	rq.AddCookie(&http.Cookie{Name: CookieName, Value: testToken})
	if _, body := f.do(rq); !strings.Contains(body, `value="`+testToken+`"`) || !strings.Contains(body, `id="act-hold"`) {
		t.Errorf("job page with the cookie has no armed hold button")
	}
	// Login: a wrong token is refused, the right one sets a strict cookie.
	if code, _ := f.do(post("/login", url.Values{"token": {"nope"}}, false)); code != http.StatusForbidden {
		t.Errorf("login with a wrong token: %d", code)
	}
	w = httptest.NewRecorder()
	lr := post("/login", url.Values{"token": {testToken}, "next": {"//evil.example/"}}, false)
	lr.Host = "127.0.0.1"
	f.srv.ServeHTTP(w, lr)
	cs := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(cs) != 1 || cs[0].SameSite != http.SameSiteStrictMode || !cs[0].HttpOnly || w.Header().Get("Location") != "/" {
		t.Fatalf("login: %d %v location %q", w.Code, cs, w.Header().Get("Location"))
	}
	// Cookie and form token: the job moves.
	code, body := f.do(post("/jobs/j1/hold", url.Values{"token": {testToken}, "note": {"<b>maintenance</b>"}}, true))
	if code != http.StatusSeeOther {
		t.Fatalf("hold with the token: %d\n%s", code, body)
	}
	if st := f.where("j1"); st != job.Held {
		t.Fatalf("hold with the token: job in %s", st)
	}
	j, err := job.ReadJob(f.s.JobDir(job.Held, "", "j1"))
	if err != nil || j.Reason != job.ReasonHeld+": <b>maintenance</b>" {
		t.Fatalf("held job: %v %+v", err, j)
	}
	// An action the state does not allow is a conflict, not a crash.
	if code, body := f.do(post("/jobs/j1/requeue", tok, true)); code != http.StatusConflict {
		t.Errorf("requeue of a held job: %d\n%s", code, body)
	}
}

// A read-only server refuses every POST, token or not, and shows no buttons.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	f.submit("j1", nil)
	if code, _ := f.do(post("/jobs/j1/hold", url.Values{"token": {testToken}}, true)); code != http.StatusForbidden {
		t.Errorf("POST on a read-only server: %d", code)
	}
	if code, _ := f.do(post("/login", url.Values{"token": {testToken}}, false)); code != http.StatusForbidden {
		t.Errorf("login on a read-only server: %d", code)
	}
	if st := f.where("j1"); st != job.Queued {
		t.Fatalf("job moved to %s", st)
	}
	if _, body := f.get("/jobs/j1"); strings.Contains(body, "act-") {
		t.Errorf("read-only job page shows action buttons")
	}
	if _, err := New(Config{Ctl: &ctl.Ctl{Root: f.s.Root}, Actions: true, Token: "short"}); err == nil {
		t.Errorf("actions with a short token accepted")
	}
}

// Only loopback Host headers are served by default (DNS rebinding).
func TestHostGuard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	for host, want := range map[string]int{"127.0.0.1:8080": 200, "localhost:1": 200, "[::1]:8080": 200, "evil.example": http.StatusMisdirectedRequest, "10.0.0.1:8080": http.StatusMisdirectedRequest} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = host
		if code, _ := f.do(r); code != want {
			t.Errorf("Host %s: %d, want %d", host, code, want)
		}
	}
}

func TestCheckListen(t *testing.T) {
	t.Parallel()
	for addr, ok := range map[string]bool{"127.0.0.1:8080": true, "[::1]:0": true, "localhost:8080": true, ":8080": false, "0.0.0.0:8080": false, "192.0.2.1:80": false, "nohost": false} {
		if err := CheckListen(addr, false); (err == nil) != ok {
			t.Errorf("CheckListen(%q): %v", addr, err)
		}
	}
	if err := CheckListen("0.0.0.0:8080", true); err != nil {
		t.Errorf("--allow-remote: %v", err)
	}
}

// A missing job is a 404 saying so; a corrupt job.json and a FIFO
// planted as its history and output are shown as problems, at once.
func TestMissingCorruptAndHostileFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	code, body := f.get("/jobs/nosuchjob")
	if code != http.StatusNotFound || !strings.Contains(body, "not found") {
		t.Errorf("missing job: %d\n%s", code, body)
	}
	f.submit("bad", func(r *job.SubmitRequest) { r.Held = true })
	dir := f.s.JobDir(job.Held, "", "bad")
	if err := os.WriteFile(filepath.Join(dir, job.JobFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{job.EventsFile, job.OutputName(job.Stdout, 1)} {
		p := filepath.Join(dir, name)
		_ = os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		code, body = f.get("/jobs/bad")
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the job page blocked on a FIFO")
	}
	if code != http.StatusOK || !strings.Contains(body, `id="problem"`) || !strings.Contains(body, "job.json unreadable") {
		t.Errorf("corrupt job: %d\n%s", code, body)
	}
	if !strings.Contains(body, "not a regular file") {
		t.Errorf("FIFO history not reported:\n%s", body)
	}
	// The list shows it as a problem row; the overview counts it.
	if _, body := f.get("/jobs"); !strings.Contains(body, "!held") {
		t.Errorf("jobs page does not flag the corrupt job:\n%s", body)
	}
	if code, _ := f.get("/"); code != http.StatusOK {
		t.Errorf("overview with a corrupt job: %d", code)
	}
}

// The overview's counts are stats --json's; the age buckets and kinds
// are stats --ages'; the last hour counts the stream's finished jobs.
func TestOverview(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	f.submit("q1", nil)
	f.submit("q2", func(r *job.SubmitRequest) { r.Kind = "exec" })
	f.submit("h1", func(r *job.SubmitRequest) { r.Held = true })
	f.submit("k1", func(r *job.SubmitRequest) { r.Held = true })
	if _, err := f.s.Move("k1", job.Held, job.Killed, "test", "cancelled", nil); err != nil {
		t.Fatal(err)
	}
	code, body := f.get("/")
	if code != http.StatusOK {
		t.Fatalf("overview: %d\n%s", code, body)
	}
	st, err := ctl.Count(f.s, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range job.States {
		re := regexp.MustCompile(`data-state="` + string(state) + `">(\d+)<`)
		m := re.FindStringSubmatch(body)
		if m == nil || m[1] != strconv.Itoa(st.States[state]) {
			t.Errorf("state %s: page %v, stats %d", state, m, st.States[state])
		}
	}
	for _, want := range []string{"exec 1, noop 1", `id="oldest" href="/jobs/q1"`, `id="failures-hour">1<`, `id="succeeded-hour">0<`, "<svg"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	// The next view reads what the stream gained since: one more kill.
	if _, err := f.s.Move("h1", job.Held, job.Killed, "test", "cancelled", nil); err != nil {
		t.Fatal(err)
	}
	if _, body = f.get("/"); !strings.Contains(body, `id="failures-hour">2<`) {
		t.Errorf("second overview does not count the new kill")
	}
}

// The job list reads only the job.json files of the page it shows, pages
// through every job exactly once, and filters by state, kind, text in
// the reason, and age.
func TestJobsPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	for i := range 35 {
		f.submit(fmt.Sprintf("j%03d", i), func(r *job.SubmitRequest) {
			if i%5 == 0 {
				r.Kind, r.Held = "exec", true
			}
		})
	}
	if _, err := f.s.Move("j010", job.Held, job.Killed, "test", "needle in a reason", nil); err != nil {
		t.Fatal(err)
	}
	reads := 0
	pg, err := f.srv.cfg.Ctl.JobsPage(ctl.JobQuery{Limit: 10, Read: func(string) { reads++ }})
	if err != nil {
		t.Fatal(err)
	}
	if reads != 10 || pg.JobFilesRead != 10 || len(pg.Rows) != 10 || !pg.More || pg.Matched != 35 || !pg.Exact {
		t.Fatalf("first page: %d reads, %+v", reads, pg)
	}
	seen := map[string]bool{}
	path := "/jobs?sort=oldest"
	for path != "" {
		code, body := f.get(path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		for _, m := range regexp.MustCompile(`<td><a href="/jobs/(j\d+)">`).FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Errorf("%s shown twice", m[1])
			}
			seen[m[1]] = true
		}
		m := regexp.MustCompile(`href="(/jobs\?[^"]*)" id="next"`).FindStringSubmatch(body)
		path = ""
		if m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(seen) != 35 {
		t.Errorf("paging showed %d jobs, want 35", len(seen))
	}
	count := func(path string) int {
		_, body := f.get(path)
		return len(regexp.MustCompile(`<td><a href="/jobs/j\d+">`).FindAllString(body, -1))
	}
	if n := count("/jobs?state=held"); n != 6 {
		t.Errorf("state=held: %d rows, want 6", n)
	}
	if n := count("/jobs?kind=exec"); n != 7 {
		t.Errorf("kind=exec: %d rows, want 7", n)
	}
	if n := count("/jobs?q=NEEDLE"); n != 1 {
		t.Errorf("q=NEEDLE: %d rows, want 1", n)
	}
	if n := count("/jobs?age=1h"); n != 0 {
		t.Errorf("age=1h: %d rows, want 0", n)
	}
	if code, _ := f.get("/jobs?state=bogus"); code != http.StatusBadRequest {
		t.Errorf("unknown state: %d", code)
	}
}

// Run serves on a free loopback port, prints the URL and the token, and
// stops with its context.
func TestRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- Run(&ctl.Ctl{Root: f.s.Root}, Options{Listen: "127.0.0.1:0", Actions: true, Stdout: pw, Stderr: io.Discard, Context: ctx})
		pw.Close()
	}()
	buf := make([]byte, 4096)
	var out string
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out, "/login\n") && time.Now().Before(deadline) {
		n, err := pr.Read(buf)
		out += string(buf[:n])
		if err != nil {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	m := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/)\n`).FindStringSubmatch(out)
	tm := regexp.MustCompile(`token \(valid until this process stops\): ([0-9a-f]{32})\n`).FindStringSubmatch(out)
	if m == nil || tm == nil {
		t.Fatalf("serve printed:\n%s", out)
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", m[1], resp.Status)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
	if err := Run(&ctl.Ctl{Root: f.s.Root}, Options{Listen: "0.0.0.0:0", Stdout: io.Discard, Stderr: io.Discard}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Errorf("non-loopback listen without --allow-remote: %v", err)
	}
}
