package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/daemon"
)

// intersperse lets flags follow a command's arguments ("history ID
// --json", "cancel ID --reason R"): the flag package stops at the first
// argument, so the flags written after it are moved before it, each with
// its value, keeping their order and the arguments'. "--" ends the flags;
// "-" (stdin) is an argument. Global flags before the command, and
// between a command and its subcommand, stay where they are.
func intersperse(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	i := leading(app.Flags, args, 1, &out)
	cmds := app.Commands
	var flags []cli.Flag
	found := false
	for i < len(args) {
		cmd := findCommand(cmds, args[i])
		if cmd == nil {
			break
		}
		out = append(out, args[i])
		i++
		flags, cmds, found = cmd.Flags, cmd.Subcommands, true
		if len(cmds) == 0 {
			break
		}
		i = leading(flags, args, i, &out)
	}
	if !found {
		return args
	}
	var fl, pos []string
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && a != "-":
			fl = append(fl, a)
			if takesValue(flags, a) && i+1 < len(args) {
				i++
				fl = append(fl, args[i])
			}
		default:
			pos = append(pos, a)
		}
	}
	return append(append(out, fl...), pos...)
}

// leading copies the flags (with their values) at args[i:] to out and
// returns the index of the first token that is not one.
func leading(flags []cli.Flag, args []string, i int, out *[]string) int {
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" && args[i] != "--" {
		*out = append(*out, args[i])
		if takesValue(flags, args[i]) && i+1 < len(args) {
			i++
			*out = append(*out, args[i])
		}
		i++
	}
	return i
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// takesValue reports whether tok ("--name" or "-n", without "=value")
// is a known flag that takes a value (every kind but a bool).
func takesValue(flags []cli.Flag, tok string) bool {
	if strings.Contains(tok, "=") {
		return false
	}
	name := strings.TrimLeft(tok, "-")
	for _, f := range flags {
		if daemon.FlagNamed(f, name) {
			_, isBool := f.(*cli.BoolFlag)
			return !isBool
		}
	}
	return false
}
