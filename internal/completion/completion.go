// Package completion writes bash and zsh completion scripts for a
// urfave/cli program, from its definition: commands (and their
// subcommands), flags, which flags take a value, and the values worth
// offering for some of them (states, kinds, log levels, directories,
// files). A script is static except for job IDs: completing the argument
// of a command whose ArgsUsage starts with ID runs the program's hidden
// JobIDsCommand, which lists the state directories that command applies
// to (names only, never a job.json) and prints at most a few hundred IDs.
package completion

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
)

// Special values of a Hints entry.
const (
	Files    = "@files"    // file names
	Dirs     = "@dirs"     // directory names
	Commands = "@commands" // executable names
	JobIDs   = "@jobids"   // job IDs, from the program's JobIDsCommand
)

// JobIDsCommand is the hidden command a script runs to complete job IDs:
// "PROG [--spool DIR] __jobids COMMAND PREFIX" prints the IDs COMMAND
// takes that start with PREFIX, one a line. The --spool written on the
// command line being completed, if any, is passed on.
const JobIDsCommand = "__jobids"

// idArgs: an ArgsUsage naming job IDs ("ID", "ID...", "ID... | -").
// Compiled on first use: a package's initialisation runs at every start
// of every program that links it (farroctl --version included).
var idArgs = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^ID\b`) })

// Hints are the words to offer for the value of a flag (by flag name, in
// every command) and for the arguments of a command (by command path,
// "crawl start", prefixed with "args:"). A value is a space-separated word
// list or one of Files, Dirs, Commands.
type Hints map[string]string

// DefaultHints covers farro's programs.
var DefaultHints = Hints{
	"spool":     Dirs,
	"textfile":  Dirs,
	"log-level": "debug info warn error",
	"state":     "queued deferred held in-progress stale failed succeeded killed",
	"kind":      "exec noop crawl.fetch",
	"exec":      Commands,
}

// node is one command (or the program itself) flattened for the scripts.
type node struct {
	path   string // "" for the program, else "cmd sub"
	subs   []*cli.Command
	flags  []flagInfo
	args   string // hint for positional arguments ("" none)
	usage  string
	hidden bool
}

type flagInfo struct {
	names  []string // with dashes: --spool, -s
	valued bool
	usage  string
	hint   string
}

func collect(app *cli.App, hints Hints) []node {
	if hints == nil {
		hints = DefaultHints
	}
	root := node{subs: visible(app.Commands), flags: flags(app.Flags, hints, true, !app.HideVersion)}
	root.args = argHint(hints, "", app.ArgsUsage)
	nodes := []node{root}
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range visible(cmds) {
			path := strings.TrimSpace(prefix + " " + c.Name)
			n := node{path: path, subs: visible(c.Subcommands), flags: flags(c.Flags, hints, !c.HideHelp, false), usage: c.Usage}
			n.args = argHint(hints, path, c.ArgsUsage)
			nodes = append(nodes, n)
			walk(path, c.Subcommands)
		}
	}
	walk("", app.Commands)
	return nodes
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

func flags(fs []cli.Flag, hints Hints, help, version bool) []flagInfo {
	var out []flagInfo
	for _, f := range fs {
		if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
			continue
		}
		fi := flagInfo{}
		for _, n := range f.Names() {
			fi.names = append(fi.names, dash(n))
		}
		if df, ok := f.(cli.DocGenerationFlag); ok {
			fi.valued = df.TakesValue()
			fi.usage = df.GetUsage()
		}
		if fi.valued {
			fi.hint = hints[f.Names()[0]]
		}
		out = append(out, fi)
	}
	// A program already set up (run) carries the help and version flags;
	// one not run yet does not: add them once.
	seen := map[string]bool{}
	for _, f := range out {
		for _, n := range f.names {
			seen[n] = true
		}
	}
	if help && !seen["--help"] {
		out = append(out, flagInfo{names: []string{"--help", "-h"}, usage: "show help"})
	}
	if version && !seen["--version"] {
		out = append(out, flagInfo{names: []string{"--version", "-v"}, usage: "print the version"})
	}
	return out
}

func dash(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func argHint(hints Hints, path, argsUsage string) string {
	if h, ok := hints["args:"+path]; ok {
		return h
	}
	if strings.Contains(argsUsage, "FILE") {
		return Files
	}
	if idArgs().MatchString(argsUsage) {
		return JobIDs
	}
	return ""
}

// Write prints the completion script of app for shell ("bash" or "zsh").
func Write(w io.Writer, app *cli.App, shell string, hints Hints) error {
	switch shell {
	case "bash":
		return writeBash(w, app, hints)
	case "zsh":
		return writeZsh(w, app, hints)
	}
	return fmt.Errorf("unknown shell %q (bash or zsh)", shell)
}

// Compiled on first use: a package's initialisation runs at every start
// of every program that links it (farroctl --version included).
var unsafeIdent = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9_]`) })

func ident(name string) string { return "_farro_" + unsafeIdent().ReplaceAllString(name, "_") }

// words quotes a space-separated word list for a shell single-quoted string.
func sq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func writeBash(w io.Writer, app *cli.App, hints Hints) error {
	nodes := collect(app, hints)
	fn := ident(app.Name)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# bash completion for %s (generated by `%s completion bash`).\n", app.Name, app.Name)
	p("# Load it with: source <(%s completion bash)\n", app.Name)
	p("# or install it as /usr/share/bash-completion/completions/%s.\n\n", app.Name)

	// Lookup tables, one case statement each, keyed by command path.
	p("%s_subs() {\n\tcase \"$1\" in\n", fn)
	for _, n := range nodes {
		if len(n.subs) > 0 {
			var names []string
			for _, s := range n.subs {
				names = append(names, s.Names()...)
			}
			p("\t%s) echo %s ;;\n", sq(n.path), sq(strings.Join(names, " ")))
		}
	}
	p("\tesac\n}\n\n")
	p("%s_flags() {\n\tcase \"$1\" in\n", fn)
	for _, n := range nodes {
		var names []string
		for _, f := range n.flags {
			names = append(names, f.names...)
		}
		p("\t%s) echo %s ;;\n", sq(n.path), sq(strings.Join(names, " ")))
	}
	p("\tesac\n}\n\n")
	p("# %s_value PATH FLAG: the hint for FLAG's value; no output: FLAG takes none.\n", fn)
	p("%s_value() {\n\tcase \"$1|$2\" in\n", fn)
	for _, n := range nodes {
		for _, f := range n.flags {
			if !f.valued {
				continue
			}
			h := f.hint
			if h == "" {
				h = "@none"
			}
			for _, name := range f.names {
				p("\t%s) echo %s ;;\n", sq(n.path+"|"+name), sq(h))
			}
		}
	}
	p("\tesac\n}\n\n")
	p("%s_args() {\n\tcase \"$1\" in\n", fn)
	for _, n := range nodes {
		if n.args != "" {
			p("\t%s) echo %s ;;\n", sq(n.path), sq(n.args))
		}
	}
	p("\tesac\n}\n\n")

	p(`# %[1]s_offer HINT: fill COMPREPLY from a hint for the word being completed.
%[1]s_offer() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	case "$1" in
	@none) COMPREPLY=() ;;
	@files) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
	@dirs) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")) ;;
	@commands) COMPREPLY=($(compgen -c -- "$cur")) ;;
	@jobids) COMPREPLY=($(compgen -W "$(%[1]s_jobids)" -- "$cur")) ;;
	*) COMPREPLY=($(compgen -W "$1" -- "$cur")) ;;
	esac
}

# %[1]s_jobids: the job IDs that the command at $path takes and that start
# with $cur, as the program lists them (--spool as on the command line).
%[1]s_jobids() {
	local prog=${COMP_WORDS[0]} dir=$spool
	local -a sp=()
	[[ $prog == "~/"* ]] && prog=$HOME/${prog#"~/"}
	[[ $dir == "~/"* ]] && dir=$HOME/${dir#"~/"}
	[[ -n $dir ]] && sp=(--spool "$dir")
	"$prog" "${sp[@]}" %[3]s "$path" "$cur" 2>/dev/null </dev/null
}

%[1]s() {
	local cur=${COMP_WORDS[COMP_CWORD]} path="" spool="" i w hint subs
	COMPREPLY=()
	# Walk the words before the cursor: descend into (sub)commands, skip
	# flags and the values of the flags that take one.
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [[ $w == -* ]]; then
			case $w in
			--spool=*) spool=${w#--spool=} ;;
			--spool) ((i + 1 < COMP_CWORD)) && spool=${COMP_WORDS[i + 1]} ;;
			esac
			if [[ $w != *=* && -n $(%[1]s_value "$path" "$w") ]]; then
				((i++))
				if ((i == COMP_CWORD)); then
					%[1]s_offer "$(%[1]s_value "$path" "$w")"
					return
				fi
			fi
			continue
		fi
		subs=" $(%[1]s_subs "$path") "
		if [[ $subs == *" $w "* ]]; then
			path=${path:+$path }$w
		fi
	done
	if [[ $cur == --*=* ]]; then
		hint=$(%[1]s_value "$path" "${cur%%%%=*}")
		[[ -n $hint ]] || return
		local prefix=${cur%%%%=*}=
		COMP_WORDS[COMP_CWORD]=${cur#*=}
		%[1]s_offer "$hint"
		COMPREPLY=("${COMPREPLY[@]/#/$prefix}")
		return
	fi
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(%[1]s_flags "$path")" -- "$cur"))
		return
	fi
	subs=$(%[1]s_subs "$path")
	if [[ -n $subs ]]; then
		COMPREPLY=($(compgen -W "$subs" -- "$cur"))
		return
	fi
	hint=$(%[1]s_args "$path")
	[[ -n $hint ]] && %[1]s_offer "$hint"
}

complete -F %[1]s %[2]s
`, fn, app.Name, JobIDsCommand)
	_, err := io.WriteString(w, b.String())
	return err
}

// zq escapes text for the inside of a zsh _arguments description
// ("[...]") within a single-quoted word.
func zq(s string) string {
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	r := strings.NewReplacer("'", `'\''`, "[", "(", "]", ")", ":", `\:`, "\\", `\\`)
	return r.Replace(s)
}

func zshAction(hint string) string {
	switch hint {
	case "":
		return " "
	case Files:
		return "_files"
	case Dirs:
		return "_files -/"
	case Commands:
		return "_command_names -e"
	}
	return "(" + hint + ")"
}

func writeZsh(w io.Writer, app *cli.App, hints Hints) error {
	nodes := collect(app, hints)
	fn := ident(app.Name)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("#compdef %s\n", app.Name)
	p("# zsh completion for %s (generated by `%s completion zsh`).\n", app.Name, app.Name)
	p("# Load it with: source <(%s completion zsh)   (after compinit)\n", app.Name)
	p("# or install it as _%s in a directory of $fpath, e.g.\n# /usr/share/zsh/vendor-completions/_%s.\n\n", app.Name, app.Name)

	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].path < nodes[j].path })
	for _, n := range nodes {
		name := fn
		if n.path != "" {
			name = fn + "_" + unsafeIdent().ReplaceAllString(n.path, "_")
		}
		p("%s() {\n", name)
		p("\tlocal curcontext=$curcontext state line ret=1\n")
		p("\ttypeset -A opt_args\n")
		if n.path == "" {
			// Seen by the functions of the subcommands (dynamic scope):
			// the program as typed, and the --spool given before the
			// command.
			p("\tlocal _farro_prog=$words[1] _farro_spool\n")
		}
		p("\t_arguments -C -s \\\n")
		for _, f := range n.flags {
			for _, fname := range f.names {
				if f.valued {
					p("\t\t'%s=[%s]:%s:%s' \\\n", fname, zq(f.usage), strings.TrimLeft(fname, "-"), zshAction(f.hint))
				} else {
					p("\t\t'%s[%s]' \\\n", fname, zq(f.usage))
				}
			}
		}
		switch {
		case len(n.subs) > 0:
			p("\t\t'1: :->cmds' \\\n\t\t'*:: :->args' && ret=0\n")
			p("\tcase $state in\n\tcmds)\n\t\tlocal -a cmds\n\t\tcmds=(\n")
			for _, s := range n.subs {
				for _, sn := range s.Names() {
					p("\t\t\t'%s:%s'\n", sn, zq(s.Usage))
				}
			}
			p("\t\t)\n\t\t_describe -t commands 'command' cmds && ret=0\n\t\t;;\n\targs)\n")
			if n.path == "" {
				p("\t\t_farro_spool=${opt_args[--spool]}\n")
			}
			p("\t\tcase $line[1] in\n")
			for _, s := range n.subs {
				sub := fn + "_" + unsafeIdent().ReplaceAllString(strings.TrimSpace(n.path+" "+s.Name), "_")
				p("\t\t%s) %s && ret=0 ;;\n", strings.Join(s.Names(), "|"), sub)
			}
			p("\t\tesac\n\t\t;;\n\tesac\n")
		case n.args == JobIDs:
			p("\t\t'*:job ID:%s__jobids %s' && ret=0\n", fn, strings.ReplaceAll(n.path, " ", `\ `))
		case n.args != "":
			p("\t\t'*:argument:%s' && ret=0\n", zshAction(n.args))
		default:
			p("\t\t&& ret=0\n")
		}
		p("\treturn ret\n}\n\n")
	}
	p(`# %[1]s__jobids [COMPADD-OPTIONS] PATH: offer the job IDs that command
# PATH takes, as the program lists them (--spool as on the command line).
# _arguments puts compadd's options before the action's own argument.
%[1]s__jobids() {
	local cmd=${@[-1]} dir=$_farro_spool prog=${_farro_prog:-%[2]s} i
	local -a sp ids
	for ((i = 1; i < CURRENT; i++)); do
		case $words[i] in
		--spool) dir=$words[i+1] ;;
		--spool=*) dir=${words[i]#--spool=} ;;
		esac
	done
	[[ $prog == "~/"* ]] && prog=$HOME/${prog#"~/"}
	[[ $dir == "~/"* ]] && dir=$HOME/${dir#"~/"}
	[[ -n $dir ]] && sp=(--spool "$dir")
	ids=(${(f)"$("$prog" "${sp[@]}" %[3]s "$cmd" "$PREFIX" 2>/dev/null </dev/null)"})
	compadd "${@[1,-2]}" -- "${ids[@]}"
}

`, fn, app.Name, JobIDsCommand)
	p(`if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
	%[1]s "$@"
else
	compdef %[1]s %[2]s
fi
`, fn, app.Name)
	_, err := io.WriteString(w, b.String())
	return err
}
