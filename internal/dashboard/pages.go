package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// page is what every template gets.
type page struct {
	Title   string
	Nav     string
	Spool   string
	OnStore bool // a PostgreSQL store: no files, no locks
	Actions bool
	Authed  bool
	Refresh int // seconds; 0: no reload
	Msg     string
	Err     string
	Now     time.Time
	Data    any
}

func (s *Server) base(r *http.Request, title, nav string) page {
	p := page{Title: title, Nav: nav, Spool: s.cfg.Ctl.Root, Actions: s.cfg.Actions, Authed: s.authed(r),
		Msg: oneLine(r.URL.Query().Get("msg"), 300), Now: time.Now().UTC()}
	if s.cfg.Ctl.OnStore() {
		p.Spool, p.OnStore = "PostgreSQL "+s.cfg.Ctl.StoreName(), true
	}
	return p
}

func (s *Server) render(w http.ResponseWriter, status int, name string, p page) {
	var b bytes.Buffer
	if err := pageTemplates().ExecuteTemplate(&b, name, p); err != nil {
		http.Error(w, "farroctl serve: rendering "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	p := s.base(r, http.StatusText(status), "")
	p.Err = oneLine(err.Error(), 2000)
	s.render(w, status, "error", p)
}

// failRead reports a page's reading that failed: on a database, one that
// did not answer or answered an error (503: the same page works again
// once it answers; the server keeps running), else a 500.
func (s *Server) failRead(w http.ResponseWriter, r *http.Request, err error) {
	if s.cfg.Ctl.OnStore() {
		s.fail(w, r, http.StatusServiceUnavailable, fmt.Errorf("the database %s did not answer: %v (reload once it is back)", s.cfg.Ctl.StoreName(), err))
		return
	}
	s.fail(w, r, http.StatusInternalServerError, err)
}

// spoolOnly renders, with a 200, the one line that says a page is kept
// in a spool only and where to look instead (err is ctl.ErrSpoolOnly).
func (s *Server) spoolOnly(w http.ResponseWriter, r *http.Request, title, nav string, err error) {
	p := s.base(r, title, nav)
	p.Data = oneLine(err.Error(), 2000)
	s.render(w, http.StatusOK, "spoolonly", p)
}

// ---- overview

type stateRow struct {
	State      job.State
	Count      int
	Kinds      string
	Buckets    []int
	Unreadable int
	HasShape   bool
}

type overviewData struct {
	Stats      *ctl.Stats
	Rows       []stateRow
	Edges      []string
	ShapeAt    time.Time
	ShapeNote  string
	Chart      chart
	Top        ctl.TopDoc
	Agents     []agentRow
	Daemons    []agentRow
	OldestAge  string
	StreamNote string
}

type agentRow struct {
	ID       string
	State    string
	PID      int
	Slots    int
	JobsHeld int
	LastSeen string
	Started  string
	Jobs     []ctl.TopJob
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	c := s.ctl(r)
	st, err := c.StatsOf()
	if err != nil {
		s.failRead(w, r, err)
		return
	}
	d := overviewData{Stats: st}
	for _, e := range ctl.AgeEdges {
		d.Edges = append(d.Edges, strconv.Itoa(int(e/time.Minute))+"m")
	}
	for i := range d.Edges {
		d.Edges[i] = "≤" + d.Edges[i]
	}
	d.Edges = append(d.Edges, ">"+strings.TrimPrefix(d.Edges[len(d.Edges)-1], "≤"))
	sh, shErr := s.currentShape()
	reads := "every job.json"
	if c.OnStore() {
		reads = "every job of the database"
	}
	switch {
	case sh != nil:
		d.ShapeAt = sh.At
		d.ShapeNote = "ages and kinds as of " + sh.At.Format(time.RFC3339) + " (recomputed at most every " + s.cfg.ShapeEvery.String() + ": it reads " + reads + ")"
	case shErr != nil:
		d.ShapeNote = "ages and kinds unavailable: " + oneLine(shErr.Error(), 300)
	default:
		d.ShapeNote = "ages and kinds are being computed (they read " + reads + "); reload in a moment"
	}
	for _, state := range job.States {
		row := stateRow{State: state, Count: st.States[state]}
		if sh != nil {
			row.HasShape = true
			sa := sh.Ages[state]
			for _, b := range sa.Buckets {
				row.Buckets = append(row.Buckets, b.Count)
			}
			row.Unreadable = sa.Unreadable
			row.Kinds = kindsText(sh.Kinds[state])
		}
		d.Rows = append(d.Rows, row)
	}
	if st.OldestQueuedAge != nil {
		d.OldestAge = fmtDur(time.Duration(*st.OldestQueuedAge * float64(time.Second)))
	}
	now := time.Now().UTC()
	fs, bad, err := s.hour.update(c, now)
	if err != nil {
		d.StreamNote = "event stream unreadable: " + oneLine(err.Error(), 300)
	} else if bad > 0 {
		d.StreamNote = fmt.Sprintf("%d unreadable line(s) of the event stream skipped", bad)
	}
	d.Chart = hourChart(fs, now)
	if top, err := c.WorkersOf(); err == nil {
		d.Top = top
	}
	d.Agents, d.Daemons = s.agentRows(c, d.Top)
	p := s.base(r, "Overview", "overview")
	p.Refresh = int(s.cfg.Refresh / time.Second)
	p.Data = d
	s.render(w, http.StatusOK, "overview", p)
}

// agentRows joins the registry (agents --json) with what each agent holds
// (top --json's workers).
func (s *Server) agentRows(c *ctl.Ctl, top ctl.TopDoc) (agents, daemons []agentRow) {
	l, err := c.AgentsOf()
	held := map[string][]ctl.TopJob{}
	for _, w := range top.Workers {
		held[w.Agent] = w.Jobs
	}
	now := time.Now()
	seen := map[string]bool{}
	if err == nil {
		for _, e := range l.Agents {
			st := "gone"
			switch {
			case e.Live:
				st = "live"
			case e.StoppedAt != nil:
				st = "gone (stopped)"
			}
			if e.Problem != "" {
				st += " (" + e.Problem + ")"
			}
			seen[e.ID] = true
			agents = append(agents, agentRow{ID: e.ID, State: st, PID: e.PID, Slots: e.Slots, JobsHeld: e.JobsHeld,
				LastSeen: ago(e.LastSeen, now), Started: stamp(e.StartedAt), Jobs: held[e.ID]})
		}
		for _, e := range l.Daemons {
			st := "gone"
			if e.Live {
				st = "live"
			}
			daemons = append(daemons, agentRow{ID: e.ID, State: st, PID: e.PID, LastSeen: ago(e.LastSeen, now), Started: stamp(e.StartedAt)})
		}
	}
	for _, w := range top.Workers {
		if !seen[w.Agent] {
			agents = append(agents, agentRow{ID: w.Agent, State: w.State, JobsHeld: len(w.Jobs), LastSeen: "-", Started: "-", Jobs: w.Jobs})
		}
	}
	return agents, daemons
}

// currentShape returns the age shape, starting a computation in the
// background when there is none or it is older than ShapeEvery, and
// waiting for a running one at most ShapeWait.
func (s *Server) currentShape() (*ctl.Shape, error) {
	s.shapeMu.Lock()
	cur, err, run := s.shape, s.shapeErr, s.shapeRun
	stale := cur == nil || time.Since(cur.At) > s.cfg.ShapeEvery
	if stale && run == nil {
		run = make(chan struct{})
		s.shapeRun = run
		go func() {
			sh, err := s.cfg.Ctl.ShapeOf()
			s.shapeMu.Lock()
			if err == nil {
				s.shape = sh
			}
			s.shapeErr = err
			s.shapeRun = nil
			s.shapeMu.Unlock()
			close(run)
		}()
	}
	s.shapeMu.Unlock()
	if run != nil {
		select {
		case <-run:
			s.shapeMu.Lock()
			cur, err = s.shape, s.shapeErr
			s.shapeMu.Unlock()
		case <-time.After(s.cfg.ShapeWait):
		}
	}
	return cur, err
}

func kindsText(m map[string]int) string {
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		name := k
		if name == "" {
			name = "(unreadable)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, m[k]))
	}
	return strings.Join(parts, ", ")
}

// ---- jobs

type jobsData struct {
	Page    *ctl.JobPage
	Q       jobsForm
	States  []job.State
	Ages    []string
	Prev    string
	Next    string
	From    int
	To      int
	Message string
}

type jobsForm struct {
	State  string
	Kind   string
	Age    string
	Text   string
	Sort   string
	Offset int
}

func (f jobsForm) query(offset int) string {
	v := url.Values{}
	for k, x := range map[string]string{"state": f.State, "kind": f.Kind, "age": f.Age, "q": f.Text, "sort": f.Sort} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if offset > 0 {
		v.Set("offset", strconv.Itoa(offset))
	}
	return "/jobs?" + v.Encode()
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := jobsForm{State: q.Get("state"), Kind: strings.TrimSpace(q.Get("kind")), Age: q.Get("age"), Text: strings.TrimSpace(q.Get("q")), Sort: q.Get("sort")}
	jq := ctl.JobQuery{Kind: f.Kind, Text: f.Text, Newest: f.Sort != "oldest", Limit: s.cfg.PageSize}
	if f.State != "" {
		st, ok := ctl.ParseState(f.State)
		if !ok {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("unknown state %q", f.State))
			return
		}
		jq.States = []job.State{st}
	}
	if f.Age != "" {
		d, err := time.ParseDuration(f.Age)
		if err != nil || d < 0 {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("age %q: want a duration such as 5m or 1h", f.Age))
			return
		}
		jq.MinAge = d
	}
	if o := q.Get("offset"); o != "" {
		n, err := strconv.Atoi(o)
		if err != nil || n < 0 {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("offset %q: want a number", o))
			return
		}
		f.Offset, jq.Offset = n, n
	}
	pg, err := s.ctl(r).JobsPage(jq)
	if err != nil {
		s.failRead(w, r, err)
		return
	}
	d := jobsData{Page: pg, Q: f, States: job.States, From: f.Offset + 1, To: f.Offset + len(pg.Rows)}
	for _, e := range ctl.AgeEdges {
		d.Ages = append(d.Ages, strconv.Itoa(int(e/time.Minute))+"m")
	}
	if f.Offset > 0 {
		d.Prev = f.query(max(0, f.Offset-s.cfg.PageSize))
	}
	if pg.More {
		d.Next = f.query(f.Offset + len(pg.Rows))
	}
	p := s.base(r, "Jobs", "jobs")
	p.Data = d
	s.render(w, http.StatusOK, "jobs", p)
}

// ---- one job

type jobData struct {
	ID      string
	Doc     *ctl.ShowDoc
	JobJSON string
	Prompt  string
	History []ctl.HistoryEntry
	HistErr string
	Output  []ctl.OutputTail
	OutErr  string
	OutNote string // the output is not here (a database): where it is
	Actions []string
	Token   string
}

func (s *Server) jobPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c := s.ctl(r)
	doc, err := c.ShowOf(id)
	if err != nil {
		status := http.StatusInternalServerError
		if ctl.ExitCode(err) == ctl.ExitUsage {
			status = http.StatusBadRequest
		} else if errors.Is(err, job.ErrNotFound) || strings.Contains(err.Error(), "not found") {
			status = http.StatusNotFound
		} else {
			s.failRead(w, r, err)
			return
		}
		s.fail(w, r, status, err)
		return
	}
	d := jobData{ID: doc.ID, Doc: doc}
	if doc.Job != nil {
		b, _ := json.MarshalIndent(doc.Job, "", "  ")
		d.JobJSON = string(b)
	}
	if len(doc.Prompt) > 0 {
		var b bytes.Buffer
		if json.Indent(&b, doc.Prompt, "", "  ") == nil {
			d.Prompt = cut(b.String(), 16<<10)
		}
	}
	if d.History, err = c.HistoryOf(doc.ID); err != nil {
		d.HistErr = oneLine(err.Error(), 500)
	}
	if d.Output, err = c.OutputOf(doc.ID, s.cfg.OutputTail); errors.Is(err, ctl.ErrSpoolOnly) {
		d.OutNote = oneLine(err.Error(), 500)
	} else if err != nil {
		d.OutErr = oneLine(err.Error(), 500)
	}
	if s.cfg.Actions {
		for _, a := range ctl.Actions {
			if ctl.Applies(a, doc.Location) {
				d.Actions = append(d.Actions, string(a))
			}
		}
		if s.authed(r) {
			d.Token = s.cfg.Token
		}
	}
	p := s.base(r, "Job "+doc.ID, "jobs")
	p.Data = d
	s.render(w, http.StatusOK, "job", p)
}

// act runs one operator action on one job: only with actions enabled,
// from this origin, with the token both in the cookie and in the form.
// Anything else is refused (403) before the spool is touched.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), ctl.Action(r.PathValue("action"))
	if !s.cfg.Actions {
		s.fail(w, r, http.StatusForbidden, errors.New("refused: actions are disabled (start farroctl serve with --actions)"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("refused: %v", err))
		return
	}
	if !sameOrigin(r) {
		s.fail(w, r, http.StatusForbidden, errors.New("refused: the request comes from another origin"))
		return
	}
	if !s.authed(r) || !s.tokenOK(r.PostForm.Get("token")) {
		s.fail(w, r, http.StatusForbidden, errors.New("refused: no valid action token (enter the token farroctl serve printed at /login)"))
		return
	}
	known := false
	for _, a := range ctl.Actions {
		known = known || a == action
	}
	if !known {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("unknown action %q", action))
		return
	}
	var out, errs bytes.Buffer
	c := *s.ctl(r)
	c.Stdout, c.Stderr = &out, &errs
	c.Stdin = strings.NewReader("")
	err := c.Act(action, []string{id}, ctl.ActOptions{Note: oneLine(r.PostForm.Get("note"), 500)})
	msg := strings.TrimSpace(out.String() + " " + errs.String())
	if err != nil {
		if msg == "" {
			msg = err.Error()
		}
		s.fail(w, r, http.StatusConflict, fmt.Errorf("%s %s: %s", action, id, msg))
		return
	}
	target := "/jobs/" + url.PathEscape(id)
	if action == ctl.Remove {
		target = "/jobs"
	}
	http.Redirect(w, r, target+"?msg="+url.QueryEscape(msg), http.StatusSeeOther)
}

// ---- login

func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	p := s.base(r, "Action token", "login")
	p.Data = safeNext(r.URL.Query().Get("next"))
	s.render(w, http.StatusOK, "login", p)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Actions {
		s.fail(w, r, http.StatusForbidden, errors.New("refused: actions are disabled (start farroctl serve with --actions)"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil || !sameOrigin(r) {
		s.fail(w, r, http.StatusForbidden, errors.New("refused: bad login request"))
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	if !s.tokenOK(tok) {
		s.fail(w, r, http.StatusForbidden, errors.New("refused: wrong token (use the one farroctl serve printed when it started)"))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// safeNext keeps a redirect on this server.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	return next
}

// ---- crawls

func (s *Server) crawls(w http.ResponseWriter, r *http.Request) {
	sums, problems, err := s.cfg.Ctl.CrawlsOf()
	if errors.Is(err, ctl.ErrSpoolOnly) {
		s.spoolOnly(w, r, "Crawls", "crawls", err)
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	p := s.base(r, "Crawls", "crawls")
	p.Err = strings.Join(problems, "; ")
	p.Data = sums
	s.render(w, http.StatusOK, "crawls", p)
}

type crawlData struct {
	Sum     *ctl.CrawlSummary
	Cfg     *crawl.Crawl
	Budgets [][2]string
	Rate    string
	WhyURL  string
	Why     *ctl.WhyAnswer
	WhyErr  string
	Jobs    string
	HTTP    string
}

func (s *Server) crawlPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	sum, cr, err := s.cfg.Ctl.CrawlOf(name)
	if errors.Is(err, ctl.ErrSpoolOnly) {
		s.spoolOnly(w, r, "Crawl "+name, "crawls", err)
		return
	}
	if err != nil {
		status := http.StatusInternalServerError
		if ctl.ExitCode(err) == ctl.ExitUsage {
			status = http.StatusNotFound
		}
		s.fail(w, r, status, err)
		return
	}
	d := crawlData{Sum: sum, Cfg: cr}
	budget := func(n int64) string {
		if n <= 0 {
			return "unlimited"
		}
		return strconv.FormatInt(n, 10)
	}
	d.Budgets = [][2]string{
		{"pages", budget(cr.MaxPages)}, {"pages per domain", budget(cr.MaxPagesPerDomain)},
		{"pages per run", budget(cr.MaxPagesPerRun)}, {"pages per domain per run", budget(cr.MaxPagesPerDomainPerRun)},
		{"in flight", budget(int64(cr.MaxInFlight))}, {"in flight per domain", budget(int64(cr.MaxInFlightPerDomain))},
		{"max depth", budget(int64(cr.MaxDepth))},
	}
	d.Rate = fmt.Sprintf("%.2f URLs/s over the last %s of running time; %.2f pages/s over the crawl's %s", sum.RatePerSecond,
		fmtDur(time.Duration(sum.RateWindowS*float64(time.Second))), sum.AveragePerSecond, fmtDur(time.Duration(sum.ElapsedMS)*time.Millisecond))
	var js []string
	for _, st := range job.States {
		if n := sum.JobStates[st]; n > 0 {
			js = append(js, fmt.Sprintf("%s %d", st, n))
		}
	}
	d.Jobs = strings.Join(js, ", ")
	codes := make([]string, 0, len(sum.HTTPStatus))
	for k := range sum.HTTPStatus {
		codes = append(codes, k)
	}
	sort.Strings(codes)
	for i, k := range codes {
		codes[i] = fmt.Sprintf("%s: %d", k, sum.HTTPStatus[k])
	}
	d.HTTP = strings.Join(codes, ", ")
	if u := strings.TrimSpace(r.URL.Query().Get("url")); u != "" {
		d.WhyURL = u
		if d.Why, err = s.cfg.Ctl.WhyOf(name, u); err != nil {
			d.WhyErr = oneLine(err.Error(), 500)
		}
	}
	p := s.base(r, "Crawl "+sum.Name, "crawls")
	p.Data = d
	s.render(w, http.StatusOK, "crawl", p)
}

// ---- text helpers

func oneLine(s string, n int) string {
	return cut(strings.Join(strings.Fields(s), " "), n)
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < 48*time.Hour:
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmtDur(now.Sub(t)) + " ago"
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
