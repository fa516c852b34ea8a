package dashboard

import (
	"html/template"
	"net/url"
	"strings"
	"sync"
	"time"
)

var funcs = template.FuncMap{
	"path":  url.PathEscape,
	"query": url.QueryEscape,
	"ts": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"tsv": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	},
	"dash": func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	},
	"since": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "-"
		}
		return fmtDur(time.Since(*t)) + " ago"
	},
	"short": func(s string) string { return oneLine(s, 120) },
	"join":  strings.Join,
}

// pageTemplates parses the pages on first use: a package-level parse ran
// at every farroctl start, whatever the command (cmd/farroctl's
// TestFarroctlInitIsSmall).
var pageTemplates = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("").Funcs(funcs).Parse(pageSource))
})

const pageSource = `
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>{{.Title}} · farro</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#243447;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:baseline}
header a{color:#cfe3ff;text-decoration:none}header a.on{color:#fff;font-weight:bold;border-bottom:2px solid #fff}
header .spool{margin-left:auto;color:#9ab;font-size:12px}
main{padding:12px 16px;max-width:1300px}
h1{font-size:20px;margin:6px 0 10px}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;background:#fff;margin:4px 0}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eef2f6;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.problem{color:#a00;font-weight:600}.note{color:#666;font-size:12px}
.msg{background:#e7f6e7;border:1px solid #9c9;padding:6px 10px}.err{background:#fbeaea;border:1px solid #d99;padding:6px 10px}
pre{background:#fff;border:1px solid #ddd;padding:8px;overflow:auto;max-height:360px;white-space:pre-wrap;word-break:break-all}
form.inline{display:inline}button{margin:2px}
.live{color:#070;font-weight:600}.gone{color:#999}
svg{background:#fff;border:1px solid #ddd}
</style></head><body>
<header><b>farro</b>
<a href="/" class="{{if eq .Nav "overview"}}on{{end}}">Overview</a>
<a href="/jobs" class="{{if eq .Nav "jobs"}}on{{end}}">Jobs</a>
<a href="/crawls" class="{{if eq .Nav "crawls"}}on{{end}}">Crawls</a>
{{if .Actions}}<a href="/login" class="{{if eq .Nav "login"}}on{{end}}">{{if .Authed}}actions enabled{{else}}enter action token{{end}}</a>{{else}}<span class="note">read-only</span>{{end}}
<span class="spool">{{.Spool}} · {{.Now.Format "15:04:05"}} UTC</span></header>
<main>
{{if .Msg}}<p class="msg" id="msg">{{.Msg}}</p>{{end}}
{{if .Err}}<p class="err" id="err">{{.Err}}</p>{{end}}
{{end}}

{{define "foot"}}</main></body></html>{{end}}

{{define "error"}}{{template "head" .}}<h1>{{.Title}}</h1>{{template "foot" .}}{{end}}

{{define "spoolonly"}}{{template "head" .}}<h1>{{.Title}}</h1><p class="note" id="spool-only">{{.Data}}</p>{{template "foot" .}}{{end}}

{{define "overview"}}{{template "head" .}}{{with .Data}}
<h1>Overview</h1>
<table id="states"><tr><th>state</th><th>jobs</th>{{range .Edges}}<th>{{.}}</th>{{end}}<th>unreadable</th><th>kinds</th></tr>
{{range .Rows}}<tr><td><a href="/jobs?state={{.State}}">{{.State}}</a></td><td class="n count" data-state="{{.State}}">{{.Count}}</td>
{{if .HasShape}}{{range .Buckets}}<td class="n">{{if .}}{{.}}{{end}}</td>{{end}}<td class="n">{{if .Unreadable}}{{.Unreadable}}{{end}}</td><td>{{.Kinds}}</td>
{{else}}{{range $.Data.Edges}}<td></td>{{end}}<td></td><td></td>{{end}}</tr>
{{end}}<tr><th>total</th><td class="n" id="total">{{.Stats.Total}}</td><td colspan="12" class="note">{{.ShapeNote}}</td></tr></table>
<p>{{if $.OnStore}}<span class="note" id="store-note">jobs are rows of the database: no locks, corrupt or temporary files</span>
{{else}}locks <b id="locks">{{.Stats.Locks}}</b> · corrupt <b id="corrupt">{{.Stats.Corrupt}}</b> · tmp <b>{{.Stats.Tmp}}</b>
{{if .Stats.Hostile}} · <span class="problem">hostile entries {{.Stats.Hostile}} (run farroctl fsck)</span>{{end}}
{{end}}{{if .Stats.PausedKinds}} · paused kinds: <b>{{join .Stats.PausedKinds ", "}}</b>{{end}}</p>
<p>oldest queued job: {{if .Stats.OldestQueuedID}}<a id="oldest" href="/jobs/{{path .Stats.OldestQueuedID}}">{{.Stats.OldestQueuedID}}</a> ({{.OldestAge}} old){{else}}<span id="oldest">none</span>{{end}}</p>
<h2>Last hour</h2>
<p>succeeded <b id="succeeded-hour">{{.Chart.Succeeded}}</b> · failed or killed <b id="failures-hour">{{.Chart.Failures}}</b>
<span class="note">(from the event stream, one bar a minute{{if .Chart.Max}}, highest {{.Chart.Max}}{{end}}){{if .StreamNote}} {{.StreamNote}}{{end}}</span></p>
<svg id="chart" width="{{.Chart.Width}}" height="{{.Chart.Height}}" viewBox="0 0 {{.Chart.Width}} {{.Chart.Height}}" role="img" aria-label="jobs finished per minute over the last hour">
{{range .Chart.Bins}}<g><title>{{.Label}}: {{.Succeeded}} succeeded, {{.Fails}} failed or killed</title>
{{if .OKH}}<rect x="{{.X}}" y="{{.OKY}}" width="{{.W}}" height="{{.OKH}}" fill="#3a9a4a"></rect>{{end}}
{{if .FailH}}<rect x="{{.X}}" y="{{.FailY}}" width="{{.W}}" height="{{.FailH}}" fill="#c33"></rect>{{end}}</g>
{{end}}</svg>
<div class="note">{{.Chart.From.Format "15:04"}} – {{.Chart.To.Format "15:04"}} UTC · green succeeded, red failed or killed</div>
<h2>Agents</h2>
<table id="agents"><tr><th>agent</th><th>state</th><th>pid</th><th>slots</th><th>jobs held</th><th>last seen</th><th>started</th><th>running jobs (kind, attempt, last heartbeat)</th></tr>
{{range .Agents}}<tr><td>{{.ID}}</td><td class="{{if eq .State "live"}}live{{else}}gone{{end}}">{{.State}}</td><td class="n">{{.PID}}</td><td class="n">{{.Slots}}</td><td class="n">{{.JobsHeld}}</td><td>{{.LastSeen}}</td><td>{{.Started}}</td>
<td>{{range .Jobs}}<div><a href="/jobs/{{path .ID}}">{{.ID}}</a> {{.Kind}} #{{.Attempt}} heartbeat {{since .LastHeartbeat}}{{if .Problem}} <span class="problem">{{.Problem}}</span>{{end}}</div>{{end}}</td></tr>
{{else}}<tr><td colspan="8" class="note">no agent has registered in this {{if $.OnStore}}database{{else}}spool{{end}}</td></tr>{{end}}</table>
{{if .Daemons}}<table id="daemons"><tr><th>daemon</th><th>state</th><th>pid</th><th>last seen</th><th>started</th></tr>
{{range .Daemons}}<tr><td>{{.ID}}</td><td class="{{if eq .State "live"}}live{{else}}gone{{end}}">{{.State}}</td><td class="n">{{.PID}}</td><td>{{.LastSeen}}</td><td>{{.Started}}</td></tr>{{end}}</table>{{end}}
{{end}}{{template "foot" .}}{{end}}

{{define "jobs"}}{{template "head" .}}{{with .Data}}
<h1>Jobs</h1>
<form method="get" action="/jobs" id="filters">
state <select name="state"><option value="">any</option>{{range .States}}<option value="{{.}}"{{if eq (print .) $.Data.Q.State}} selected{{end}}>{{.}}</option>{{end}}</select>
kind <input name="kind" value="{{.Q.Kind}}" size="10">
in its state for at least <select name="age"><option value="">any time</option>{{range .Ages}}<option value="{{.}}"{{if eq . $.Data.Q.Age}} selected{{end}}>{{.}}</option>{{end}}</select>
text <input name="q" value="{{.Q.Text}}" size="18" placeholder="in ID or reason">
<select name="sort"><option value="newest">newest first</option><option value="oldest"{{if eq .Q.Sort "oldest"}} selected{{end}}>oldest first</option></select>
<button type="submit">filter</button></form>
<p class="note" id="pageinfo">{{if .Page.Rows}}{{.From}}–{{.To}}{{else}}no job{{end}}{{if .Page.Exact}} of {{.Page.Matched}}{{end}} · {{.Page.Listed}} listed{{if not $.OnStore}} · {{.Page.JobFilesRead}} job.json read{{end}}</p>
<table id="jobs"><tr><th>ID</th><th>status</th><th>kind</th><th>pri</th><th>attempts</th><th>agent</th><th>updated</th><th>reason</th></tr>
{{range .Page.Rows}}<tr><td><a href="/jobs/{{path .ID}}">{{.ID}}</a></td>
{{if .Problem}}<td class="problem">!{{.Location}}</td><td colspan="6" class="problem">{{.Problem}}</td>
{{else}}<td>{{.Status}}</td><td>{{dash .Kind}}</td><td class="n">{{.Priority}}</td><td class="n">{{.Attempts}}/{{if .MaxAttempts}}{{.MaxAttempts}}{{else}}-{{end}}</td><td>{{dash .Agent}}</td><td>{{ts .UpdatedAt}}</td><td>{{if .KindPaused}}[kind paused] {{end}}{{short (or .Reason .Error)}}</td>{{end}}</tr>
{{end}}</table>
<p>{{if .Prev}}<a href="{{.Prev}}" id="prev">← previous</a>{{end}} {{if .Next}}<a href="{{.Next}}" id="next">next →</a>{{end}}</p>
{{end}}{{template "foot" .}}{{end}}

{{define "job"}}{{template "head" .}}{{with .Data}}
<h1>Job <span id="job-id">{{.ID}}</span></h1>
{{if .Doc.Problem}}<p class="problem" id="problem">{{.Doc.Problem}}</p>{{end}}
<table id="summary"><tr><th>location</th><td id="location">{{.Doc.Location}}</td></tr>
{{with .Doc.Job}}<tr><th>status</th><td id="status">{{.Status}}</td></tr><tr><th>kind</th><td>{{.Kind}}</td></tr>
<tr><th>attempts</th><td>{{.Attempts}} of {{if $.Data.Doc.MaxAttemptsApplied}}{{$.Data.Doc.MaxAttemptsApplied}} ({{$.Data.Doc.MaxAttemptsFrom}}){{else}}-{{end}}</td></tr>
<tr><th>reason</th><td id="reason">{{dash .Reason}}</td></tr>{{if .Error}}<tr><th>error</th><td>{{.Error}}</td></tr>{{end}}
<tr><th>created</th><td>{{tsv .CreatedAt}}</td></tr><tr><th>updated</th><td>{{tsv .UpdatedAt}}</td></tr>{{end}}
{{if not $.OnStore}}<tr><th>directory</th><td>{{.Doc.Dir}}</td></tr>{{end}}
{{with .Doc.Lock}}<tr><th>lock</th><td>{{if .Owner}}{{.Owner.Actor}} pid {{.Owner.PID}} ({{.Verdict}}){{end}} {{.Problem}}</td></tr>{{end}}
{{with .Doc.Control}}<tr><th>control</th><td>{{.Action}} requested</td></tr>{{end}}</table>
{{if .Actions}}<h2>Actions</h2>
{{if not .Token}}<p class="note" id="need-token">Actions need the token farroctl serve printed: <a href="/login?next=/jobs/{{path .ID}}">enter it</a>. Without it they are refused.</p>{{end}}
<div id="actions">{{range .Actions}}<form class="inline" method="post" action="/jobs/{{path $.Data.ID}}/{{.}}"><input type="hidden" name="token" value="{{$.Data.Token}}"><button type="submit" name="do" value="{{.}}" id="act-{{.}}">{{.}}</button></form>{{end}}</div>{{end}}
<h2>History</h2>
{{if .HistErr}}<p class="problem">{{.HistErr}}</p>{{end}}
<table id="history"><tr><th>time</th><th>actor</th><th>from</th><th>to</th><th>attempt</th><th>reason</th></tr>
{{range .History}}{{if .Bad}}<tr><td colspan="6" class="problem">line {{.Line}} unreadable: {{.Bad}}</td></tr>{{else}}<tr class="ev"><td>{{tsv .Time}}</td><td>{{dash .Actor}}</td><td>{{dash (print .From)}}</td><td>{{dash (print .To)}}</td><td class="n">{{.Attempt}}</td><td>{{.Reason}}</td></tr>{{end}}
{{end}}</table>
<h2>Output</h2>
{{if .OutErr}}<p class="problem">{{.OutErr}}</p>{{end}}
{{if .OutNote}}<p class="note" id="output-note">{{.OutNote}}</p>{{else}}{{range .Output}}<h3>attempt {{.Attempt}}, {{.Stream}} ({{.Size}} bytes{{if .Truncated}}, last part{{end}})</h3>{{if .Problem}}<p class="problem">{{.Problem}}</p>{{end}}<pre>{{.Tail}}</pre>
{{else}}<p class="note">no output</p>{{end}}{{end}}
<h2>{{if $.OnStore}}the job's row{{else}}job.json{{end}}</h2>{{if .JobJSON}}<pre id="jobjson">{{.JobJSON}}</pre>{{else}}<p class="problem">job.json unreadable</p>{{end}}
{{if .Prompt}}<h2>prompt.json</h2><pre>{{.Prompt}}</pre>{{end}}
{{end}}{{template "foot" .}}{{end}}

{{define "login"}}{{template "head" .}}
<h1>Action token</h1>
{{if .Actions}}<p>Enter the token farroctl serve printed when it started. It is kept in a cookie of this browser (same site only) until the server stops.</p>
<form method="post" action="/login" id="login"><input type="hidden" name="next" value="{{.Data}}"><input type="password" name="token" id="token" size="40" autocomplete="off"> <button type="submit" id="login-submit">enable actions</button></form>
{{else}}<p>This dashboard is read-only: start <code>farroctl serve --actions</code> to enable the operator actions.</p>{{end}}
{{template "foot" .}}{{end}}

{{define "crawls"}}{{template "head" .}}
<h1>Crawls</h1>
<table id="crawls"><tr><th>crawl</th><th>state</th><th>run</th><th>domains</th><th>discovered</th><th>fetched</th><th>failed</th><th>pending</th><th>in flight</th><th>rate</th><th>updated</th></tr>
{{range .Data}}<tr><td><a href="/crawls/{{path .Name}}">{{.Name}}</a></td><td>{{.State}}{{if .StateReason}} ({{.StateReason}}){{end}}</td><td class="n">{{.Run}}</td><td class="n">{{.Domains}}</td><td class="n">{{.Discovered}}</td><td class="n">{{.Fetched}}</td><td class="n">{{.Failed}}</td><td class="n">{{.Pending}}</td><td class="n">{{.InFlight}}</td><td class="n">{{printf "%.2f/s" .RatePerSecond}}</td><td>{{tsv .UpdatedAt}}</td></tr>
{{else}}<tr><td colspan="11" class="note">no crawl in this spool (farroctl crawl start)</td></tr>{{end}}</table>
{{template "foot" .}}{{end}}

{{define "crawl"}}{{template "head" .}}{{with .Data}}
<h1>Crawl <span id="crawl-name">{{.Sum.Name}}</span></h1>
<table id="crawl-status"><tr><th>state</th><td id="crawl-state">{{.Sum.State}}{{if .Sum.StateReason}} ({{.Sum.StateReason}}){{end}}</td></tr>
<tr><th>run</th><td>{{.Sum.Run}} (released {{.Sum.RunReleased}} this run)</td></tr><tr><th>frontier</th><td>{{.Sum.Frontier}}</td></tr>
<tr><th>seeds</th><td>{{join .Sum.Seeds " "}} (scope {{.Sum.Scope}})</td></tr>
<tr><th>rate</th><td>{{.Rate}}</td></tr>
<tr><th>discovered / released / fetched</th><td>{{.Sum.Discovered}} / {{.Sum.Released}} / {{.Sum.Fetched}}</td></tr>
<tr><th>failed / robots denied / refused</th><td>{{.Sum.Failed}} / {{.Sum.RobotsDenied}} / {{.Sum.Refused}}</td></tr>
<tr><th>pending / in flight</th><td>{{.Sum.Pending}} / {{.Sum.InFlight}}</td></tr>
<tr><th>dropped links</th><td>{{.Sum.OutOfScope}} out of scope, {{.Sum.TooDeep}} too deep, {{.Sum.Duplicates}} duplicates, {{.Sum.Invalid}} invalid, {{.Sum.Filtered}} filtered</td></tr>
<tr><th>jobs</th><td>{{dash .Jobs}}</td></tr><tr><th>HTTP status</th><td>{{dash .HTTP}}</td></tr></table>
<h2>Budgets</h2><table id="budgets">{{range .Budgets}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>{{end}}</table>
<h2>Domains</h2>
<table id="domains"><tr><th>domain</th><th>status</th><th>pages crawled</th><th>discovered</th><th>pending</th><th>in flight</th><th>errors</th><th>next allowed request</th><th>reason</th></tr>
{{range .Sum.PerDomain}}<tr class="domain"><td>{{.Domain}}</td><td>{{.Status}}</td><td class="n">{{.PagesCrawledOnce}}</td><td class="n">{{.Discovered}}</td><td class="n">{{.Pending}}</td><td class="n">{{.InFlight}}</td><td class="n">{{.Errors}}</td><td>{{.Next $.Now}}</td><td>{{.Reason}}{{if .ReasonDetail}}: {{.ReasonDetail}}{{end}}</td></tr>
{{end}}</table>
<h2>Why</h2>
<form method="get" action="/crawls/{{path .Sum.Name}}" id="why-form">URL <input name="url" value="{{.WhyURL}}" size="60"> <button type="submit">why?</button></form>
{{if .WhyErr}}<p class="problem">{{.WhyErr}}</p>{{end}}
{{with .Why}}<p id="why"><b>{{.Verdict}}</b>: {{.Message}}{{if .JobID}} (<a href="/jobs/{{path .JobID}}">open the job</a>){{end}}</p>{{end}}
{{end}}{{template "foot" .}}{{end}}
`
