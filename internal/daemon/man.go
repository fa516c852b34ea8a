package daemon

import (
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/pause"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/job"
)

// DocDir is where the Debian package installs the repository's documents
// (-ldflags "-X ...DocDir=/usr/share/doc/farro"): in the repository's
// layout (README.md, docs/FARROCTL.md, ...), each gzip-compressed. Empty
// in a source build: the documents are where the checkout has them.
var DocDir = ""

// DocPath is where a user of this build reads the repository's document
// rel ("README.md", "docs/FARROCTL.md"): rel itself in a source build,
// DocDir/rel.gz in a packaged one.
func DocPath(rel string) string {
	if DocDir == "" {
		return rel
	}
	return path.Join(DocDir, rel) + ".gz"
}

// PackagedEnvFile is the environment file of the Debian package's units,
// named in the man pages' FILES whatever the build.
const PackagedEnvFile = "/etc/farro/farro.env"

// ExitStatus is one exit status of a program and what it means, as
// "meaning: details" (--help gives the meaning, the man page all).
type ExitStatus struct {
	Code int
	Text string
}

// ManEntry is one tagged paragraph of a man page section.
type ManEntry struct{ Tag, Text string }

// ManPage holds what a program's man page says beyond its CLI definition
// (name, usage, description, flags, commands): EXIT STATUS, SIGNALS,
// ENVIRONMENT (besides the flags' variables, which are listed from the
// flags) and FILES. Attach it with SetMan; daemon.App attaches DaemonMan.
type ManPage struct {
	Exit    []ExitStatus
	Signals []ManEntry
	Env     []ManEntry
	EnvNote string // a closing paragraph of ENVIRONMENT
	Files   []ManEntry
}

const manKey = "farro-man"

// SetMan attaches p to app for WriteMan.
func SetMan(app *cli.App, p *ManPage) {
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	app.Metadata[manKey] = p
}

// ManOf is the ManPage attached to app (nil if none): a daemon adds its
// own entries to the one daemon.App attached.
func ManOf(app *cli.App) *ManPage {
	p, _ := app.Metadata[manKey].(*ManPage)
	return p
}

// AddExit adds an exit status, keeping the list ordered by code.
func (p *ManPage) AddExit(code int, text string) {
	p.Exit = append(p.Exit, ExitStatus{code, text})
	slices.SortStableFunc(p.Exit, func(a, b ExitStatus) int { return a.Code - b.Code })
}

// DaemonMan is what the three daemons' man pages share: their exit
// statuses (0, 1, registry.ExitAlreadyRunning, ExitConfig), the drain on
// SIGTERM/SIGINT (SignalContext), the systemd variables, the spool and its
// layout, the environment files and the units.
func DaemonMan(name string) *ManPage {
	unit := name + ".service"
	envFile := "/etc/farro/" + name + ".env"
	if name == "agentd" {
		unit, envFile = "agentd@.service", "/etc/farro/agentd-ID.env"
	}
	return &ManPage{
		Exit: []ExitStatus{
			{0, "success: stopped cleanly (after a drain), or --check-config found nothing wrong"},
			{1, "runtime error: the spool could not be opened or written, a fatal error while running"},
			{registry.ExitAlreadyRunning, "already running: another " + name + " holds this spool's registry lock" + map[bool]string{true: " for the same --id", false: ""}[name == "agentd"] + " (the units do not restart on it)"},
			{ExitConfig, "configuration error: a bad flag or FARRO_* value, a missing required flag, a spool that is not one; one line on stderr, nothing started (the units do not restart on it)"},
		},
		Signals: []ManEntry{
			{"SIGTERM, SIGINT", "start a graceful drain: " + name + " stops taking new work, finishes or gives back what it holds, tells systemd STOPPING=1 and exits 0"},
			{"a second SIGTERM or SIGINT", "exits at once (the default action). Whatever was in flight is recovered by watchdogd, as after a crash"},
		},
		Env: []ManEntry{
			{"NOTIFY_SOCKET, WATCHDOG_USEC", "set by systemd: " + name + " reports READY=1 and STOPPING=1, and pings WATCHDOG=1 while healthy; without them it does nothing of the kind"},
			{"JOURNAL_STREAM", "set by systemd: log lines written to the journal carry their priority prefix"},
		},
		Files: append(spoolFiles(), []ManEntry{
			{envFile, "this unit's own settings, read after " + PackagedEnvFile},
			{"/lib/systemd/system/" + unit, "the systemd unit (part of farro.target)"},
		}...),
	}
}

// spoolFiles are the FILES entries of the spool, for every binary.
func spoolFiles() []ManEntry {
	spool := DefaultSpool
	note := ""
	if spool != "/var/spool/farro" {
		note = " (the Debian package's is /var/spool/farro)"
	}
	in := func(rel string) string { return spool + "/" + rel }
	return []ManEntry{
		{spool, "the spool, --spool's default" + note + ": jobs are directories, a state change is one rename(2). Its layout is described in " + DocPath("spool/README.md")},
		{in("incoming/, deferred/, held/, stale/"), "queued, deferred (not before not_before), held and stale jobs; incoming/<id>.lock/ is a job's lock, whatever its state"},
		{in("in-progress/<agent>/"), "the jobs agent <agent> runs"},
		{in("completed/succeeded/, completed/failed/, completed/killed/"), "finished jobs (failed ones are retried by managerd)"},
		{in("tmp/, corrupt/"), "jobs being submitted; quarantined entries that could not be read, never deleted automatically"},
		{in(job.StreamDir + "/*" + job.StreamSegmentExt), "the spool-wide event stream: one JSON line per job transition and operator action, a segment per UTC hour (farroctl events)"},
		{in(pause.Dir + "/<kind>"), "a paused job kind: no agent claims jobs of it (farroctl pause, resume)"},
		{in(job.AgentsDir + "/"), "the registry: <id>.lock (flock while the agent runs) and <id>.json per agent; " + registry.DaemonsDir + "/ for managerd and watchdogd (farroctl agents)"},
		{in("crawls/, domains/, sources/, pipeline/"), "the crawl frontier's and the content pipeline's state; domains/ is the domain registry every crawl shares (farroctl domains --registry)"},
		{PackagedEnvFile, "the settings (FARRO_* variables) every unit reads (EnvironmentFile=); a conffile of the Debian package"},
	}
}

// WriteMan prints app's man page (section 1) in roff, generated from its
// definition and its ManPage (SetMan): NAME, SYNOPSIS, DESCRIPTION,
// OPTIONS (every flag with its placeholder, its default and its
// variable), COMMANDS, EXIT STATUS, SIGNALS, ENVIRONMENT, FILES, SEE ALSO.
// Text is escaped for roff, never interpreted: "<id>" stays "<id>".
func WriteMan(w io.Writer, app *cli.App) error {
	var b strings.Builder
	name := app.Name
	fmt.Fprintf(&b, ".TH %s 1 \"\" %s \"farro manual\"\n", strings.ToUpper(name), roffArg("farro "+app.Version))
	b.WriteString(".nh\n.ad l\n")
	b.WriteString(".SH NAME\n" + roff(name) + " \\- " + roff(app.Usage) + "\n")

	b.WriteString(".SH SYNOPSIS\n")
	if len(app.Commands) > 0 {
		fmt.Fprintf(&b, ".B %s\n[\\fIGLOBAL OPTIONS\\fP] \\fICOMMAND\\fP [\\fIOPTIONS\\fP] [\\fIARGUMENTS\\fP]\n", roff(name))
	} else {
		fmt.Fprintf(&b, ".B %s\n[\\fIOPTIONS\\fP]\n", roff(name))
	}

	if desc := strings.TrimSpace(app.Description); desc != "" {
		b.WriteString(".SH DESCRIPTION\n")
		writeText(&b, desc)
	}

	global := map[string]bool{}
	for _, f := range app.Flags {
		global[f.Names()[0]] = true
	}
	if len(app.Commands) > 0 {
		b.WriteString(".SH GLOBAL OPTIONS\n")
	} else {
		b.WriteString(".SH OPTIONS\n")
	}
	writeFlags(&b, app.Flags, nil)

	if cmds := visible(app.Commands); len(cmds) > 0 {
		b.WriteString(".SH COMMANDS\n")
		for _, c := range cmds {
			writeCommand(&b, c, c.Name, global)
		}
	}

	p := ManOf(app)
	if p == nil {
		p = &ManPage{}
	}
	if len(p.Exit) > 0 {
		b.WriteString(".SH EXIT STATUS\n")
		for _, e := range p.Exit {
			fmt.Fprintf(&b, ".TP\n.B %d\n%s\n", e.Code, roff(e.Text))
		}
	}
	writeEntries(&b, "SIGNALS", p.Signals)

	var env []ManEntry
	for _, f := range app.Flags {
		ef, ok := f.(interface{ GetEnvVars() []string })
		if !ok || len(ef.GetEnvVars()) == 0 || !isVisible(f) {
			continue
		}
		env = append(env, ManEntry{ef.GetEnvVars()[0], "sets --" + f.Names()[0]})
	}
	env = append(env, p.Env...)
	writeEntries(&b, "ENVIRONMENT", env)
	if p.EnvNote != "" {
		b.WriteString(".PP\n")
		writeText(&b, p.EnvNote)
	}
	writeEntries(&b, "FILES", p.Files)

	b.WriteString(".SH SEE ALSO\n")
	var see []string
	for _, other := range []string{"farroctl", "agentd", "managerd", "watchdogd"} {
		if other != name {
			see = append(see, "\\fB"+other+"\\fP(1)")
		}
	}
	b.WriteString(strings.Join(see, ", ") + ", \\fBsystemctl\\fP(1), \\fBjournalctl\\fP(1)\n.PP\n")
	docs := []string{"README.md", "docs/FARROCTL.md", "docs/ARCHITECTURE.md", "docs/RELIABILITY.md", "deploy/systemd/README.md"}
	for i, d := range docs {
		sep := ",\n"
		if i == len(docs)-1 {
			sep = "\n"
		}
		b.WriteString(roff(DocPath(d)) + sep)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCommand writes command c (full name path) and its subcommands.
func writeCommand(b *strings.Builder, c *cli.Command, path string, global map[string]bool) {
	head := path
	if c.ArgsUsage != "" {
		head += " " + c.ArgsUsage
	}
	b.WriteString(".SS\n" + roff(head) + "\n")
	if len(c.Aliases) > 0 {
		b.WriteString(roff("(also: "+strings.Join(c.Aliases, ", ")+") ") + "\n")
	}
	writeText(b, c.Usage)
	if d := strings.TrimSpace(c.Description); d != "" {
		b.WriteString(".PP\n")
		writeText(b, d)
	}
	writeFlags(b, c.Flags, global)
	for _, sc := range visible(c.Subcommands) {
		writeCommand(b, sc, path+" "+sc.Name, global)
	}
}

// writeFlags writes each visible flag as a tagged paragraph: its names
// and placeholder, its usage, default and variable. A command's copy of a
// global flag (--spool: SpoolAnywhere) is left out when skip names it.
func writeFlags(b *strings.Builder, flags []cli.Flag, skip map[string]bool) {
	sorted := slices.Clone(flags)
	slices.SortStableFunc(sorted, func(x, y cli.Flag) int { return strings.Compare(x.Names()[0], y.Names()[0]) })
	for _, f := range sorted {
		if !isVisible(f) || skip[f.Names()[0]] {
			continue
		}
		usage := ""
		if df, ok := f.(cli.DocGenerationFlag); ok {
			usage = df.GetUsage()
		}
		placeholder, text := unquoteUsage(usage)
		takes := false
		if df, ok := f.(cli.DocGenerationFlag); ok {
			takes = df.TakesValue()
		}
		if takes && placeholder == "" {
			placeholder = "value"
		}
		var names []string
		for _, n := range f.Names() {
			dash := "\\-\\-"
			if len(n) == 1 {
				dash = "\\-"
			}
			names = append(names, "\\fB"+dash+roff(n)+"\\fP")
		}
		tag := strings.Join(names, ", ")
		if takes {
			tag += " \\fI" + roff(placeholder) + "\\fP"
		}
		if placeholder != "" && strings.Contains(usage, "`"+placeholder+"`") {
			// The placeholder named in the usage, in italics there too.
			text = strings.Replace(roff(text), roff(placeholder), "\\fI"+roff(placeholder)+"\\fP", 1)
		} else {
			text = roff(text)
		}
		if d, ok := FlagDefault(f); ok {
			text += " " + roff("(default: "+d+")")
		}
		if ef, ok := f.(interface{ GetEnvVars() []string }); ok && len(ef.GetEnvVars()) > 0 {
			text += " " + roff("[$"+strings.Join(ef.GetEnvVars(), ", $")+"]")
		}
		fmt.Fprintf(b, ".TP\n%s\n%s\n", tag, text)
	}
}

// FlagDefault is the default a man page gives for f: every numeric and
// duration default (0 included: "(default: 0s)" says the flag takes a
// duration and what unset means), a non-empty string or list, and a true
// boolean. Durations are written short ("1h", not "1h0m0s") and parse
// back with time.ParseDuration. A flag's own DefaultText wins.
func FlagDefault(f cli.Flag) (string, bool) {
	switch f := f.(type) {
	case *cli.DurationFlag:
		if f.DefaultText != "" {
			return f.DefaultText, true
		}
		return ShortDuration(f.Value), true
	case *cli.IntFlag:
		return text(f.DefaultText, strconv.Itoa(f.Value)), true
	case *cli.Int64Flag:
		return text(f.DefaultText, strconv.FormatInt(f.Value, 10)), true
	case *cli.UintFlag:
		return text(f.DefaultText, strconv.FormatUint(uint64(f.Value), 10)), true
	case *cli.Uint64Flag:
		return text(f.DefaultText, strconv.FormatUint(f.Value, 10)), true
	case *cli.Float64Flag:
		return text(f.DefaultText, strconv.FormatFloat(f.Value, 'g', -1, 64)), true
	case *cli.BoolFlag:
		if f.DefaultText != "" || f.Value {
			return text(f.DefaultText, "true"), true
		}
	case *cli.StringFlag:
		if v := text(f.DefaultText, f.Value); v != "" {
			return v, true
		}
	case *cli.PathFlag:
		if v := text(f.DefaultText, f.Value); v != "" {
			return v, true
		}
	case *cli.StringSliceFlag:
		if f.DefaultText != "" {
			return f.DefaultText, true
		}
		if f.Value != nil && len(f.Value.Value()) > 0 {
			return strings.Join(f.Value.Value(), ","), true
		}
	default:
		if df, ok := f.(cli.DocGenerationFlag); ok && df.TakesValue() && df.GetDefaultText() != "" {
			return df.GetDefaultText(), true
		}
	}
	return "", false
}

// unquoteUsage splits a flag's usage as urfave/cli does: the first
// `back-quoted` word is the placeholder of its value, quotes removed.
func unquoteUsage(usage string) (string, string) {
	before, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return "", usage
	}
	name, after, ok := strings.Cut(rest, "`")
	if !ok {
		return "", usage
	}
	return name, before + name + after
}

func text(override, v string) string {
	if override != "" {
		return override
	}
	return v
}

// ShortDuration writes d as time.Duration.String does, without the zero
// minutes and seconds of whole hours and minutes: 1h, 5m, 1m30s, 500ms, 0s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func isVisible(f cli.Flag) bool {
	vf, ok := f.(cli.VisibleFlag)
	return !ok || vf.IsVisible()
}

func visible(cmds []*cli.Command) []*cli.Command {
	var out []*cli.Command
	for _, c := range cmds {
		if !c.Hidden {
			out = append(out, c)
		}
	}
	return out
}

// writeEntries writes a section of tagged paragraphs (nothing when empty).
func writeEntries(b *strings.Builder, title string, entries []ManEntry) {
	if len(entries) == 0 {
		return
	}
	b.WriteString(".SH " + title + "\n")
	for _, e := range entries {
		fmt.Fprintf(b, ".TP\n\\fB%s\\fP\n%s\n", roff(e.Tag), roff(e.Text))
	}
}

// writeText writes a free text (a description): paragraphs at blank
// lines, filled, except those with an indented line (a table, an example),
// which keep their layout.
func writeText(b *strings.Builder, s string) {
	for i, para := range strings.Split(strings.TrimSpace(s), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		lines := strings.Split(strings.Trim(para, "\n"), "\n")
		pre := false
		for _, l := range lines {
			pre = pre || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		}
		if pre {
			b.WriteString(".nf\n")
		}
		for _, l := range lines {
			b.WriteString(roff(l) + "\n")
		}
		if pre {
			b.WriteString(".fi\n")
		}
	}
}

// roff escapes text for a roff text line: backslashes and minus signs
// (options and paths must copy and paste as ASCII), and a leading dot or
// apostrophe (which would make the line a request). Nothing else is
// special: "<id>", "*", "[...]" stay as they are.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// roffArg escapes text for a macro's arguments (.B TEXT): as roff, with
// double quotes doubled inside one quoted argument.
func roffArg(s string) string {
	return `"` + strings.ReplaceAll(roff(s), `"`, `""`) + `"`
}

// AddExit adds a daemon's own exit status (agentd's
// agent.ExitHandlerUnusable) to its man page and its --help.
func AddExit(app *cli.App, code int, text string) {
	p := ManOf(app)
	if p == nil {
		p = &ManPage{}
		SetMan(app, p)
	}
	p.AddExit(code, text)
	app.Description = daemonDescription(app)
}

// daemonDescription is a daemon's DESCRIPTION (man page and --help): where
// its settings come from under systemd, its exit statuses and where the
// documentation is, with this build's paths (a packaged build names the
// installed ones).
func daemonDescription(app *cli.App) string {
	envFile, note := EnvFile, ""
	if envFile == "" {
		envFile, note = PackagedEnvFile, " (Debian package)"
	}
	own := "/etc/farro/" + app.Name + ".env"
	if app.Name == "agentd" {
		own = "/etc/farro/agentd-ID.env (agentd@ID)"
	}
	var codes []string
	if p := ManOf(app); p != nil {
		for _, e := range p.Exit {
			short, _, _ := strings.Cut(e.Text, ":") // "meaning: details"
			codes = append(codes, fmt.Sprintf("%d %s", e.Code, short))
		}
	}
	return fmt.Sprintf(`Every flag can be set by its FARRO_* variable instead (a flag given wins).
The systemd units%s read the variables from
%s, then from %s.

Exit status: %s.
SIGTERM or SIGINT drains; a second one exits at once.

Documentation: man %s; %s, %s.`,
		note, envFile, own, strings.Join(codes, "; "), app.Name, DocPath("README.md"), DocPath("docs/ARCHITECTURE.md"))
}
