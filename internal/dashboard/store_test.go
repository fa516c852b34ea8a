package dashboard

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

func pgCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pgQueue is a fresh, migrated database of serverURL holding six jobs,
// set up through the store seam: one succeeded and one failed (each by
// agent w1), one running on w1, two queued (exec and noop), one held;
// and w1 registered live. closeSt closes st (at the latest when the test
// ends).
func pgQueue(t *testing.T, serverURL string) (dbURL string, st *pgstore.Store, closeSt func()) {
	t.Helper()
	dbURL = testpg.NewDatabase(t, serverURL)
	if _, err := pgstore.Migrate(pgCtx(t), dbURL); err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.Open(pgCtx(t), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	closeSt = sync.OnceFunc(func() { _ = st.Close() })
	t.Cleanup(closeSt)
	ctx := pgCtx(t)
	h := job.Holder{Actor: "agentd/w1", Agent: "w1"}
	sub := func(r job.SubmitRequest) {
		t.Helper()
		r.Prompt, r.Actor = []byte(`{"n":1}`), "test"
		if r.Kind == "" {
			r.Kind = "noop"
		}
		if _, errs := st.Submit(ctx, []job.SubmitRequest{r}); errs[0] != nil {
			t.Fatalf("submit %s: %v", r.ID, errs[0])
		}
	}
	for _, step := range []struct {
		id     string
		to     job.State
		reason string
	}{{"pgs1", job.Succeeded, "exit status 0"}, {"pgf1", job.Failed, "exit status 3"}, {"pgr1", job.InProgress, ""}} {
		sub(job.SubmitRequest{ID: step.id})
		cs, err := st.Claim(ctx, h, store.ClaimOptions{Max: 1, Lease: time.Hour})
		if err != nil || len(cs) != 1 || cs[0].Job().ID != step.id {
			t.Fatalf("claim of %s: %v %v", step.id, cs, err)
		}
		if step.to != job.InProgress {
			if err := cs[0].Commit(ctx, step.to, step.reason, nil); err != nil {
				t.Fatalf("commit %s: %v", step.id, err)
			}
		}
	}
	sub(job.SubmitRequest{ID: "pgq1", Priority: 5})
	sub(job.SubmitRequest{ID: "pgq2", Kind: "exec"})
	sub(job.SubmitRequest{ID: "pgh1", Kind: "exec", Held: true})
	if _, err := st.Register(ctx, pgstore.Registration{Kind: pgstore.KindAgentd, ID: "w1", Host: "host-a", PID: 4242,
		Concurrency: 2, Kinds: []string{"noop", "exec"}, Fresh: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return dbURL, st, closeSt
}

// pgServer is a dashboard server on dbURL's store pool, as Run makes it.
func pgServer(t *testing.T, dbURL string, cfg Config) *Server {
	t.Helper()
	c := &ctl.Ctl{Root: filepath.Join(t.TempDir(), "no-spool"), Store: dbURL, Stdout: io.Discard, Stderr: io.Discard}
	pooled, closePool, err := c.OpenStorePool(PoolMaxConns, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closePool)
	cfg.Ctl = pooled
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func serve(t *testing.T, srv *Server, r *http.Request) (int, string) {
	t.Helper()
	r.Host = "127.0.0.1:8080"
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func getOK(t *testing.T, srv *Server, path string) string {
	t.Helper()
	code, body := serve(t, srv, httptest.NewRequest(http.MethodGet, path, nil))
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, code, body)
	}
	return body
}

var jobLink = regexp.MustCompile(`<tr><td><a href="/jobs/([a-z0-9]+)">`)

// listed is the job IDs of a job list page, in order.
func listed(body string) []string {
	var ids []string
	for _, m := range jobLink.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// farroctl serve on PostgreSQL: every page from the jobs of the database
// (overview, job list with its filters and pages, a job with its
// history), an action that moves a job, the spool-only pages' one line.
func TestServeOnPostgres(t *testing.T) {
	t.Parallel()
	dbURL, st, _ := pgQueue(t, testpg.Start(t))
	srv := pgServer(t, dbURL, Config{Actions: true, Token: testToken, PageSize: 3, ShapeWait: 10 * time.Second})

	body := getOK(t, srv, "/")
	for _, want := range []string{
		`data-state="queued">2<`, `data-state="held">1<`, `data-state="in-progress">1<`,
		`data-state="succeeded">1<`, `data-state="failed">1<`, `id="total">6<`,
		`<td>exec 1, noop 1</td>`,                         // the queued row's kinds (the shape)
		`id="oldest" href="/jobs/pgq1"`,                   // created first of the queued
		`id="succeeded-hour">1<`, `id="failures-hour">1<`, // the last hour, from job_events
		`<td>w1</td><td class="live">live</td><td class="n">4242</td><td class="n">2</td><td class="n">1</td>`,
		`<a href="/jobs/pgr1">pgr1</a> noop #1`, // w1's running job
		`id="store-note"`, "PostgreSQL " + (&ctl.Ctl{Store: dbURL}).StoreName(),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %s", want)
		}
	}
	if strings.Contains(body, `id="locks"`) || strings.Contains(body, "job.json") {
		t.Errorf("overview of a database speaks of spool files:\n%s", body)
	}

	for _, tc := range []struct {
		path string
		want []string
		info string
	}{
		{"/jobs", []string{"pgs1", "pgr1", "pgq2"}, "1–3 of 6 · 6 listed"},
		{"/jobs?offset=3", []string{"pgq1", "pgh1", "pgf1"}, "4–6 of 6 · 6 listed"},
		{"/jobs?sort=oldest", []string{"pgf1", "pgh1", "pgq1"}, "1–3 of 6"},
		{"/jobs?state=queued", []string{"pgq2", "pgq1"}, "1–2 of 2 · 2 listed"},
		{"/jobs?kind=exec", []string{"pgq2", "pgh1"}, "1–2 · 6 listed"},
		{"/jobs?q=" + url.QueryEscape("STATUS 3"), []string{"pgf1"}, "1–1 · 6 listed"},
		{"/jobs?state=queued&age=5m", nil, "no job · 2 listed"},
	} {
		body := getOK(t, srv, tc.path)
		if got := listed(body); !slices.Equal(got, tc.want) {
			t.Errorf("GET %s: jobs %v, want %v", tc.path, got, tc.want)
		}
		if !strings.Contains(body, tc.info) || strings.Contains(body, "job.json read") {
			i := strings.Index(body, `id="pageinfo"`)
			t.Errorf("GET %s: page info %.80s, want %q", tc.path, body[max(i, 0):], tc.info)
		}
	}
	if body := getOK(t, srv, "/jobs"); !strings.Contains(body, `href="/jobs?offset=3"`) {
		t.Errorf("first page has no link to the next")
	}

	body = getOK(t, srv, "/jobs/pgf1")
	if n := strings.Count(body, `<tr class="ev">`); n != 3 {
		t.Errorf("pgf1's history: %d transitions, want 3 (submitted, claimed, failed)", n)
	}
	for _, want := range []string{`<td id="status">failed</td>`, "<td>agentd/w1</td><td>in-progress</td><td>failed</td>", "exit status 3",
		`id="output-note"`, "host of agent w1", "scratch/AGENT/pgf1/stdout.N.log", `&#34;kind&#34;: &#34;noop&#34;`} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %s", want)
		}
	}
	if strings.Contains(body, "<th>directory</th>") || strings.Contains(body, `class="problem"`) {
		t.Errorf("job page of a database shows a directory or a problem:\n%s", body)
	}
	if code, body := serve(t, srv, httptest.NewRequest(http.MethodGet, "/jobs/nosuch1", nil)); code != http.StatusNotFound || !strings.Contains(body, "nosuch1") {
		t.Errorf("missing job: %d\n%s", code, body)
	}

	// An action: the job page offers hold on a queued job; the POST moves it
	// in the database and its history says farroctl did.
	body = getOK(t, srv, "/jobs/pgq2")
	if !strings.Contains(body, `id="act-hold"`) || strings.Contains(body, `id="act-release"`) {
		t.Errorf("queued job's actions: %s", body[max(strings.Index(body, `id="actions"`), 0):])
	}
	code, _ := serve(t, srv, post("/jobs/pgq2/hold", url.Values{"token": {testToken}}, true))
	if code != http.StatusSeeOther {
		t.Fatalf("POST hold: %d", code)
	}
	j, err := st.Get(pgCtx(t), "pgq2")
	if err != nil || j.Status != job.Held {
		t.Fatalf("after hold: %v %v", j, err)
	}
	if body := getOK(t, srv, "/jobs/pgq2"); !strings.Contains(body, "<td>farroctl</td><td>queued</td><td>held</td>") {
		t.Errorf("hold not in the history")
	}
	if code, _ := serve(t, srv, post("/jobs/pgq1/hold", url.Values{"token": {"wrong-token-wrong-token"}}, true)); code != http.StatusForbidden {
		t.Errorf("POST with a wrong token: %d", code)
	}
	if j, _ := st.Get(pgCtx(t), "pgq1"); j == nil || j.Status != job.Queued {
		t.Errorf("a refused action moved pgq1: %v", j)
	}

	// The crawl pages: one line saying where crawls are, never an error.
	for _, path := range []string{"/crawls", "/crawls/c1", "/crawls/c1?url=" + url.QueryEscape("http://a.test/")} {
		body := getOK(t, srv, path)
		if !regexp.MustCompile(`<p class="note" id="spool-only">Crawls run on a spool only for now[^<]*farroctl serve --spool DIR[^<]*</p>`).MatchString(body) {
			t.Errorf("GET %s: no spool-only line:\n%s", path, body)
		}
	}
}

// Each request's work is bounded: a table locked by another transaction
// makes the page a 503 saying the database did not answer, at the
// request's timeout; once the lock is gone the page is back.
func TestServeOnPostgresRequestTimeout(t *testing.T) {
	t.Parallel()
	dbURL, _, _ := pgQueue(t, testpg.Start(t))
	srv := pgServer(t, dbURL, Config{RequestTimeout: time.Second, ShapeWait: 10 * time.Second})
	getOK(t, srv, "/jobs")
	conn, err := pgx.Connect(pgCtx(t), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(pgCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(pgCtx(t), "LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	code, body := serve(t, srv, httptest.NewRequest(http.MethodGet, "/jobs", nil))
	if took := time.Since(t0); code != http.StatusServiceUnavailable || !strings.Contains(body, "did not answer") || took > 5*time.Second {
		t.Errorf("GET /jobs with the table locked: %d after %s\n%s", code, took, body)
	}
	if err := tx.Rollback(pgCtx(t)); err != nil {
		t.Fatal(err)
	}
	getOK(t, srv, "/jobs")
}

// lockedBuffer is an io.Writer safe for Run's goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// farroctl serve on PostgreSQL (Run, on a real listener) keeps one
// bounded pool for its lifetime; backends cut by pg_terminate_backend
// and a database stopped make pages say so (503, never a 500), and the
// pages come back once the database does.
func TestServeOnPostgresOutage(t *testing.T) {
	t.Parallel()
	pg := testpg.StartPrivate(t)
	dbURL, _, closeSt := pgQueue(t, pg.URL)
	closeSt() // from here on only the dashboard connects

	ctx, stop := context.WithCancel(context.Background())
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(&ctl.Ctl{Root: filepath.Join(t.TempDir(), "no-spool"), Store: dbURL},
			Options{Listen: "127.0.0.1:0", Stdout: &out, Stderr: &out, Context: ctx})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == ""; {
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		for sc.Scan() {
			if m := regexp.MustCompile(`dashboard of the PostgreSQL store \S+ at (http://\S+)/$`).FindStringSubmatch(sc.Text()); m != nil {
				base = m[1]
			}
		}
		if base == "" && time.Now().After(deadline) {
			t.Fatalf("no URL printed: %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	admin, err := pgx.Connect(pgCtx(t), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	backends := func() []int {
		t.Helper()
		rows, err := admin.Query(pgCtx(t), `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY pid`)
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}

	// Many requests at once: the pool stays within its bound, and its
	// connections serve the requests that follow.
	var wg sync.WaitGroup
	codes := make(chan int, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(base + "/jobs?kind=noop")
			if err == nil {
				codes <- resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("concurrent GET /jobs: %d", c)
		}
	}
	pool := backends()
	if len(pool) == 0 || len(pool) > PoolMaxConns {
		t.Fatalf("after 16 concurrent requests the server holds %d connections %v, want 1 to %d", len(pool), pool, PoolMaxConns)
	}
	for range 5 {
		if code, body := get("/"); code != http.StatusOK {
			t.Fatalf("GET /: %d\n%s", code, body)
		}
	}
	if now := backends(); len(now) > PoolMaxConns || !slices.ContainsFunc(now, func(pid int) bool { return slices.Contains(pool, pid) }) {
		t.Errorf("connections %v after more requests, want at most %d, the pool's %v reused", now, PoolMaxConns, pool)
	}

	// Backends cut: at worst a page or two says so; then pages are back.
	if _, err := admin.Exec(pgCtx(t), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	waitPage(t, get, "/jobs/pgq1", 15*time.Second)

	// The database stopped: each page says it did not answer, naming it.
	pg.Stop()
	for _, path := range []string{"/", "/jobs", "/jobs/pgq1"} {
		code, body := get(path)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "did not answer") || !strings.Contains(body, (&ctl.Ctl{Store: dbURL}).StoreName()) {
			t.Errorf("GET %s with the database stopped: %d\n%s", path, code, body)
		}
	}
	if code, body := get("/crawls"); code != http.StatusOK || !strings.Contains(body, `id="spool-only"`) {
		t.Errorf("GET /crawls with the database stopped: %d", code)
	}
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	body := waitPage(t, get, "/", 30*time.Second)
	if !strings.Contains(body, `id="total">6<`) {
		t.Errorf("overview after the restart lacks the 6 jobs")
	}
}

// waitPage polls path until it is a 200 (returning its body); until
// then each answer must be a 503 saying the database did not answer.
func waitPage(t *testing.T, get func(string) (int, string), path string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := get(path)
		if code == http.StatusOK {
			return body
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "did not answer") {
			t.Fatalf("GET %s: %d\n%s", path, code, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s still %d after %s\n%s", path, code, within, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
