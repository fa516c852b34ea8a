package daemon

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/tally"
	"github.com/farro-dev/farro/pkg/job"
)

// ExitConfig is the exit status of a daemon refused for a configuration
// error: a bad flag or FARRO_* value, a missing required flag, a spool
// that is not one (--spool, FARRO_SPOOL). Restarting cannot fix it, so
// the systemd units list it in RestartPreventExitStatus=. 150 is
// registry.ExitAlreadyRunning, 151 agent.ExitHandlerUnusable; farroctl
// keeps its own statuses (2 for a usage error).
const ExitConfig = 152

// ConfigError is a configuration error: Exit prints it as one line,
// "NAME: configuration error: ...", and exits with ExitConfig.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return "configuration error: " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ExitCode is ExitConfig.
func (e *ConfigError) ExitCode() int { return ExitConfig }

// Configf returns a *ConfigError with a formatted message.
func Configf(format string, a ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, a...)}
}

// CheckConfigFlag is --check-config: validate everything and exit.
var CheckConfigFlag = &cli.BoolFlag{
	Name:  "check-config",
	Usage: "check the flags, the FARRO_* environment and the spool (agentd: the exec handler too), print \"NAME: configuration OK\" and exit without starting (exit " + strconv.Itoa(ExitConfig) + " on a configuration error)",
}

// CheckOnly reports whether the daemon runs for --check-config: its
// action must check what it would check at start (the spool with
// CheckSpool, not job.Open), print ConfigOK and return, taking no lock
// and writing nothing.
func CheckOnly(c *cli.Context) bool { return c.Bool(CheckConfigFlag.Name) }

// ConfigOK prints "NAME: configuration OK" on the app's writer.
func ConfigOK(c *cli.Context) error {
	_, err := fmt.Fprintln(writer(c.App), c.App.Name+": configuration OK")
	return err
}

// CheckSpool is --check-config's spool check: root must be a spool, or an
// empty directory that the daemon would lay out at start. It reads only.
func CheckSpool(root string) error {
	if err := job.CheckExisting(root); err != nil {
		return spoolError(err)
	}
	return nil
}

// OpenSpool opens the daemon's spool (job.Open with job.Existing); a
// directory that is not a spool (job.ErrNotSpool: a mistyped --spool or
// FARRO_SPOOL) is a configuration error.
func OpenSpool(root string, opts ...job.Option) (*job.Spool, error) {
	s, err := job.Open(root, append([]job.Option{job.Existing()}, opts...)...)
	if err != nil {
		return nil, spoolError(err)
	}
	return s, nil
}

func spoolError(err error) error {
	if errors.Is(err, job.ErrNotSpool) {
		return &ConfigError{Err: err}
	}
	return err
}

// Validator checks a daemon's own flags (the common ones are checked by
// App): a returned error that is not a *ConfigError is made one. Set it
// with SetValidator.
type Validator func(c *cli.Context) error

const (
	validatorKey = "farro-validator"
	argsKey      = "farro-args"
	requiredKey  = "farro-required"
)

// SetValidator makes v part of app's configuration check, run before the
// daemon starts (and by --check-config).
func SetValidator(app *cli.App, v Validator) { app.Metadata[validatorKey] = v }

// LogLevels are --log-level's values.
var LogLevels = []string{"debug", "info", "warn", "error"}

// checkConfig is the first part of every daemon's Before hook: the
// required flags, no stray arguments, the common flags, the daemon's own
// Validator. Any error is a *ConfigError.
func checkConfig(c *cli.Context) error {
	if req, ok := c.App.Metadata[requiredKey].([]string); ok {
		for _, name := range req {
			if c.String(name) == "" {
				return Configf("%s is required", refBoth(c.App, name))
			}
		}
	}
	if c.Args().Present() {
		return Configf("unexpected argument %q (%s takes flags only)", c.Args().First(), c.App.Name)
	}
	if lvl := c.String(LogLevelFlag.Name); !slices.Contains(LogLevels, lvl) {
		return Configf("%s: the log level must be one of %s", RefValue(c, LogLevelFlag.Name, fmt.Sprintf("%q", lvl)), strings.Join(LogLevels, ", "))
	}
	if err := checkStore(c); err != nil {
		return err
	}
	if c.String(SpoolFlag.Name) == "" {
		return Configf("%s must not be empty", Ref(c, SpoolFlag.Name))
	}
	if addr := c.String(MetricsAddrFlag.Name); addr != "" {
		if err := tally.CheckAddr(addr, c.Bool(MetricsAllowRemoteFlag.Name)); err != nil {
			return &ConfigError{Err: err}
		}
	}
	if v, ok := c.App.Metadata[validatorKey].(Validator); ok {
		if err := v(c); err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				return err
			}
			return &ConfigError{Err: err}
		}
	}
	return nil
}

// Ref names flag name as the user gave it: "FARRO_X" when its value came
// from the environment, else "--name".
func Ref(c *cli.Context, name string) string {
	if env, ok := fromEnv(c, name); ok {
		return env
	}
	return "--" + name
}

// RefValue is Ref with the value: "--name value", or FARRO_X="raw" with
// the variable's own text when the value came from the environment.
func RefValue(c *cli.Context, name, value string) string {
	if env, ok := fromEnv(c, name); ok {
		return env + "=" + strconv.Quote(clip(os.Getenv(env)))
	}
	return "--" + name + " " + value
}

// refBoth names a flag and its variable: "--id (FARRO_AGENT_ID)".
func refBoth(app *cli.App, name string) string {
	if ef, ok := flagNamed(app, name).(interface{ GetEnvVars() []string }); ok && len(ef.GetEnvVars()) > 0 {
		return fmt.Sprintf("--%s (%s)", name, strings.Join(ef.GetEnvVars(), ", "))
	}
	return "--" + name
}

// IsConfigError reports whether err is (or wraps) a *ConfigError.
func IsConfigError(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}

// fromEnv reports the environment variable flag name took its value from:
// one that is set, the flag not being on the command line.
func fromEnv(c *cli.Context, name string) (string, bool) {
	args, _ := c.App.Metadata[argsKey].([]string)
	for _, a := range args {
		if a == "--" {
			break
		}
		n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && n == name {
			return "", false
		}
	}
	f := flagNamed(c.App, name)
	if f == nil {
		return "", false
	}
	ef, ok := f.(interface{ GetEnvVars() []string })
	if !ok {
		return "", false
	}
	for _, e := range ef.GetEnvVars() {
		if v, ok := os.LookupEnv(e); ok && v != "" {
			return e, true
		}
	}
	return "", false
}

func flagNamed(app *cli.App, name string) cli.Flag {
	for _, f := range app.Flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// The rules a Validator applies to one flag each.

// Positive refuses a duration flag that is zero or negative.
func Positive(c *cli.Context, name string) error {
	if d := c.Duration(name); d <= 0 {
		return Configf("%s: must be positive (a duration with a unit, e.g. 2s)", RefValue(c, name, d.String()))
	}
	return nil
}

// NotNegative refuses a negative duration flag (0 has a meaning: none,
// off, forever).
func NotNegative(c *cli.Context, name string) error {
	if d := c.Duration(name); d < 0 {
		return Configf("%s: must not be negative", RefValue(c, name, d.String()))
	}
	return nil
}

// AtLeast refuses an int flag below min.
func AtLeast(c *cli.Context, name string, min int) error {
	if n := c.Int(name); n < min {
		return Configf("%s: must be at least %d", RefValue(c, name, fmt.Sprint(n)), min)
	}
	return nil
}

// First returns the first non-nil error of errs: a Validator's rules in
// the order of its flags.
func First(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Compiled on first use: a package's initialisation runs at every start
// of every program that links it (farroctl --version included).
var (
	envParseRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^could not parse "((?:[^"\\]|\\.)*)" as \w+ value from environment variable "([^"]+)" for flag ([\w-]+): `)
	})
	flagValueRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^invalid (?:boolean )?value "((?:[^"\\]|\\.)*)" for (?:flag )?-([\w-]+): `)
	})
	undefinedRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^flag provided but not defined: -+([^\s]+)$`) })
	needsArgRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^flag needs an argument: -+([^\s]+)$`) })
)

// usageError turns a parse error of urfave/cli (a bad value on the
// command line or in a FARRO_* variable, an unknown flag) into a
// one-line *ConfigError that names the flag or variable and the value,
// and says what kind of value is expected.
func usageError(app *cli.App, err error) error {
	msg := err.Error()
	if m := envParseRe().FindStringSubmatch(msg); m != nil {
		return Configf("%s=%s: %s", m[2], quoteRaw(m[1]), expected(flagNamed(app, m[3]), m[1]))
	}
	if m := flagValueRe().FindStringSubmatch(msg); m != nil {
		return Configf("--%s %s: %s", m[2], quoteRaw(m[1]), expected(flagNamed(app, m[2]), m[1]))
	}
	if m := undefinedRe().FindStringSubmatch(msg); m != nil {
		name, _, _ := strings.Cut(m[1], "=")
		var names []string
		for _, f := range app.Flags {
			names = append(names, f.Names()[0])
		}
		hint := fmt.Sprintf(" (see %s --help)", app.Name)
		if s := closest(name, names); s != "" {
			hint = fmt.Sprintf(" (did you mean --%s?)", s)
		}
		return Configf("unknown flag --%s%s", name, hint)
	}
	if m := needsArgRe().FindStringSubmatch(msg); m != nil {
		return Configf("--%s needs a value", m[1])
	}
	return Configf("%s", strings.ReplaceAll(msg, "\n", " "))
}

// quoteRaw re-quotes a value that urfave/cli or flag quoted with %q
// (so a newline in it stays \n: the error stays one line), clipped.
func quoteRaw(quoted string) string { return `"` + clip(quoted) + `"` }

// clip shortens a value quoted in an error to 100 bytes: a hostile or
// mistaken megabyte of environment is not worth a megabyte of journal.
func clip(s string) string {
	if len(s) <= 100 {
		return s
	}
	return strings.ToValidUTF8(s[:100], "") + "..."
}

// expected says what a flag's value must look like.
func expected(f cli.Flag, raw string) string {
	switch f.(type) {
	case *cli.DurationFlag:
		if _, err := time.ParseDuration(raw + "s"); err == nil {
			return "a duration needs a unit, e.g. " + strings.TrimSpace(raw) + "s, 500ms or 2m"
		}
		return "not a duration (a number with a unit, e.g. 2s, 500ms or 2m)"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag:
		return "not a whole number"
	case *cli.BoolFlag:
		return "not a boolean (true or false)"
	}
	return "invalid value"
}

// App's hooks. before is every daemon's Before: the configuration check,
// the warnings about unknown FARRO_* variables, then (unless
// --check-config) the metrics endpoint.
func before(name string) cli.BeforeFunc {
	start := startMetrics(name)
	return func(c *cli.Context) error {
		if err := checkConfig(c); err != nil {
			return err
		}
		unknown := UnknownEnv(os.Environ())
		if CheckOnly(c) {
			w := c.App.ErrWriter
			if w == nil {
				w = os.Stderr
			}
			for _, u := range unknown {
				fmt.Fprintf(w, "%s: warning: %s\n", c.App.Name, u.Message())
			}
			return nil
		}
		if len(unknown) > 0 {
			log := logx.New(writer(c.App), actorOf(c, name), c.String(LogLevelFlag.Name))
			for _, u := range unknown {
				ev := log.Warn().Str("variable", u.Name)
				if u.Suggestion != "" {
					ev = ev.Str("did_you_mean", u.Suggestion)
				}
				ev.Msg(u.Message())
			}
		}
		return start(c)
	}
}

// stripRequired takes urfave/cli's Required off flags (its refusal prints
// the whole help on stdout) and returns their names: checkConfig refuses
// them itself, in one line.
func stripRequired(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Required {
			sf.Required = false
			names = append(names, sf.Name)
		}
	}
	return names
}

func actorOf(c *cli.Context, name string) string {
	if id := c.String("id"); id != "" && flagNamed(c.App, "id") != nil {
		return name + "/" + id
	}
	return name
}
