// Command limiterctl operates a limiter table: provisioning and checks,
// entities, stored limits (one at a time or from a declarative manifest),
// the status of buckets, usage, bucket resets and top-ups, the audit
// trail and namespaces; and,
// for development, "limiterctl local": DynamoDB Local with the limiter's
// table until Ctrl-C.
//
//	limiterctl [global flags] GROUP COMMAND [flags] [args]
//
// Global flags (also accepted after the command): --table (or
// $LIMITER_TABLE), --region, --endpoint (or $LIMITER_ENDPOINT, e.g.
// http://localhost:8000 for DynamoDB Local), --namespace (or
// $LIMITER_NAMESPACE, default "default"), --principal (or
// $LIMITER_PRINCIPAL, else $USER) and -o table|json.
//
// Exit codes: 0 success; 1 a failure (something not found, a check that
// failed, a manifest that differs from the table); 2 bad usage (unknown
// command, bad flag, invalid input); 3 a store error (DynamoDB unreachable,
// throttled, table missing, access denied). See docs/operations.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Exit codes.
const (
	exitOK         = 0
	exitFailure    = 1
	exitUsage      = 2
	exitStoreError = 3
)

// command is one leaf of the command tree.
type command struct {
	path  string // "table create"
	args  string // positional arguments, for the usage line
	short string
	// minArgs and maxArgs bound the positional arguments (-1: no bound).
	minArgs, maxArgs int
	// admin makes c.adm before the command runs.
	admin bool
	// setup registers the command's own flags on c and returns the
	// command, which reads them once they are parsed.
	setup func(c *cmdCtx) func() error
}

// noFlags is the setup of a command without flags of its own.
func noFlags(run func(c *cmdCtx) error) func(c *cmdCtx) func() error {
	return func(c *cmdCtx) func() error { return func() error { return run(c) } }
}

var commands []*command

func register(cs ...*command) { commands = append(commands, cs...) }

// run is the whole program: tests call it with their own arguments and
// writers.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCmdCtx(ctx, stdout, stderr)
	// Global flags may come first; the command path is the first words.
	rest, err := c.parse(args, false)
	if err != nil {
		return c.fail(err)
	}
	if len(rest) == 0 || rest[0] == "help" {
		c.help(rest)
		if len(rest) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, argv := lookup(rest)
	if cmd == nil {
		return c.fail(usageErrorf("unknown command %q; run limiterctl help", strings.Join(rest[:min(2, len(rest))], " ")))
	}
	c.cmd = cmd
	runCmd := cmd.setup(c)
	if c.args, err = c.parse(argv, true); err != nil {
		return c.fail(err)
	}
	if c.helpAsked {
		c.commandHelp(cmd)
		return exitOK
	}
	if n := len(c.args); n < cmd.minArgs || cmd.maxArgs >= 0 && n > cmd.maxArgs {
		return c.fail(usageErrorf("%s takes %s; got %d argument(s)", cmd.path, argsRule(cmd), n))
	}
	if cmd.admin {
		if _, err := c.admin(); err != nil {
			return c.fail(err)
		}
	}
	if err := runCmd(); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// lookup finds the command named by the first one or two words.
func lookup(words []string) (*command, []string) {
	for _, cmd := range commands {
		parts := strings.Fields(cmd.path)
		if len(words) >= len(parts) && strings.Join(words[:len(parts)], " ") == cmd.path {
			return cmd, words[len(parts):]
		}
	}
	return nil, nil
}

func argsRule(cmd *command) string {
	switch {
	case cmd.maxArgs == 0:
		return "no arguments"
	case cmd.args == "":
		return "arguments"
	}
	return cmd.args
}

// help prints the command list, or a group's commands.
func (c *cmdCtx) help(words []string) {
	group := ""
	if len(words) > 1 {
		group = words[1]
	}
	if group != "" {
		if cmd, _ := lookup(words[1:]); cmd != nil {
			cmd.setup(c) // registers the command's flags
			c.commandHelp(cmd)
			return
		}
	}
	w := c.stdout
	if len(words) == 0 {
		w = c.stderr
	}
	fmt.Fprint(w, `limiterctl operates a limiter table (see docs/operations.md).

Usage: limiterctl [global flags] COMMAND [flags] [args]

Commands:
`)
	var lines []string
	for _, cmd := range commands {
		if group == "" || strings.HasPrefix(cmd.path, group+" ") || cmd.path == group {
			lines = append(lines, fmt.Sprintf("  %-42s %s", cmd.path+" "+cmd.args, cmd.short))
		}
	}
	sort.Strings(lines)
	fmt.Fprintln(w, strings.Join(lines, "\n"))
	fmt.Fprint(w, `
Global flags (before or after the command):
  --table NAME        the limiter's table ($LIMITER_TABLE)
  --region REGION     AWS region ($AWS_REGION, else us-east-1)
  --endpoint URL      DynamoDB endpoint, e.g. http://localhost:8000 for DynamoDB Local ($LIMITER_ENDPOINT)
  --namespace NS      the limiter namespace ($LIMITER_NAMESPACE, else "default")
  --principal NAME    who changes are recorded as in the audit trail ($LIMITER_PRINCIPAL, else $USER)
  -o table|json       output format (default table)

Exit codes: 0 ok, 1 failure or difference, 2 bad usage, 3 store error.
Run "limiterctl help COMMAND" or "limiterctl COMMAND -h" for a command's flags.
`)
}

func (c *cmdCtx) commandHelp(cmd *command) {
	fmt.Fprintf(c.stdout, "Usage: limiterctl %s [flags] %s\n\n%s\n\nFlags:\n", cmd.path, cmd.args, cmd.short)
	c.fs.SetOutput(c.stdout)
	c.fs.PrintDefaults()
}

// usageError is bad usage: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// failure is a failure the output already explained (a difference, a
// failed check): exit code 1, with an optional message.
type failure struct{ msg string }

func (e *failure) Error() string { return e.msg }

// fail prints err with what to do next and returns its exit code.
func (c *cmdCtx) fail(err error) int {
	code, hint := classify(err, c)
	var f *failure
	if errors.As(err, &f) && f.msg == "" {
		return code
	}
	msg := err.Error()
	fmt.Fprintf(c.stderr, "limiterctl: %s\n", msg)
	if hint != "" {
		fmt.Fprintf(c.stderr, "  %s\n", hint)
	}
	return code
}
