package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagLine is one line of a help's flag list, as pflag prints it:
// "  -h, --help            help for x" or "      --nats URL   NATS server URL".
// The value name, when there is one, follows the flag after one space and
// ends at the run of two or more spaces that starts the usage.
var flagLine = regexp.MustCompile(`^\s+(?:-[a-zA-Z], )?--([a-z0-9-]+)(?: ([^ ].*?))?(?:\s{2,}|$)`)

// placeholder is a value name a usage string chose with backquotes: upper
// case, such as URL, SEQ or KEY=VALUE.
var placeholder = regexp.MustCompile(`^[A-Z][A-Z0-9_]*(=[A-Z][A-Z0-9_]*)?$`)

// notListed names flags found on commands that never read them. No test can
// see whether a RunE reads a flag, so the ones found are pinned here; servers
// register their NATS flags with registerServer, which has no --timeout.
var notListed = map[string][]string{
	"switchyard persist serve": {"timeout"},
	"switchyard balancer":      {"timeout"},
}

// wantValueNames pins the value names of flags whose usage picks one.
var wantValueNames = map[string]string{
	"nats":  "URL",
	"set":   "KEY=VALUE",
	"up-to": "SEQ",
}

// TestHelpFlagValueNames runs every command's --help and checks its flag
// list: each value name is either the flag's type as pflag names it
// (string, duration, ...) or an upper-case placeholder, never words a
// backquote in the usage happened to capture (it once showed
// "--nats switchyard up"); every flag the command defines is listed, and
// none of the flags pinned as unread.
func TestHelpFlagValueNames(t *testing.T) {
	var cmds []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		cmds = append(cmds, c)
		for _, sub := range c.Commands() {
			if !sub.Hidden && sub.Name() != "help" && sub.Name() != "completion" {
				walk(sub)
			}
		}
	}
	walk(newRootCmd())
	for _, c := range cmds {
		path := c.CommandPath()
		args := append(strings.Fields(path)[1:], "--help")
		// The command's own flags, read here before the parallel subtests
		// start, since cobra's flag sets are not safe to share.
		defined := map[string]*pflag.Flag{}
		c.Flags().VisitAll(func(f *pflag.Flag) { defined[f.Name] = f })
		// and the root's persistent ones (--log-format, ...): its own on the
		// root, listed under "Global Flags:" below it.
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { defined[f.Name] = f })
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { defined[f.Name] = f })
		t.Run(strings.ReplaceAll(path, " ", "_"), func(t *testing.T) {
			t.Parallel()
			out, stderr, code := execute(t, args...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", args, code, stderr)
			}
			listed := helpFlags(out)
			for name, f := range defined {
				value, ok := listed[name]
				if !ok && f.Hidden {
					continue // hidden on purpose (up's --cpuprofile, for bench events)
				}
				if !ok {
					t.Errorf("--%s is defined but not in the help:\n%s", name, out)
					continue
				}
				typeName, _ := pflag.UnquoteUsage(&pflag.Flag{Value: f.Value})
				if value != typeName && !placeholder.MatchString(value) {
					t.Errorf("--%s shows the value name %q: want its type %q or an upper-case placeholder", name, value, typeName)
				}
				if want, ok := wantValueNames[name]; ok && value != want {
					t.Errorf("--%s shows the value name %q, want %q", name, value, want)
				}
			}
			for name := range listed {
				if _, ok := defined[name]; !ok && name != "help" {
					t.Errorf("the help lists --%s, which the command does not define (or the test misread the line)", name)
				}
			}
			for _, name := range notListed[path] {
				if _, ok := listed[name]; ok {
					t.Errorf("lists --%s, which it never reads", name)
				}
			}
		})
	}
}

// helpFlags reads the flag lists ("Flags:" and "Global Flags:") of a help
// text: flag name to value name ("" for a flag that takes none).
func helpFlags(help string) map[string]string {
	flags := map[string]string{}
	in := false
	for _, line := range strings.Split(help, "\n") {
		switch {
		case line == "Flags:" || line == "Global Flags:":
			in = true
		case line == "" || !strings.HasPrefix(line, " "):
			in = false
		case in:
			if m := flagLine.FindStringSubmatch(line); m != nil {
				flags[m[1]] = m[2]
			}
		}
	}
	return flags
}

// TestEveryCommandHasAnExample: each command that runs something shows at
// least one example, and each example line is a command of this tree with
// the flags and argument count it has (checkDocLine, as for the docs).
// (Was: kv del, kv keys, stream get, stream ls, the nntp commands, the
// bench commands and usenet users list, remove and reset had none, so a
// new user had to guess how to write their arguments.)
func TestEveryCommandHasAnExample(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.Hidden && sub.Name() != "help" && sub.Name() != "completion" {
				walk(sub)
			}
		}
		if c.RunE == nil || c.HasAvailableSubCommands() {
			return // only a group of commands: its help lists them
		}
		// A line ending in a backslash goes on on the next.
		example := strings.ReplaceAll(c.Example, "\\\n", " ")
		seen := 0
		for _, line := range strings.Split(example, "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "switchyard ") {
				continue // output the example shows, or another program's line
			}
			seen++
			if err := checkDocLine(line); err != nil {
				t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
			}
		}
		if seen == 0 {
			t.Errorf("%s has no example", c.CommandPath())
		}
	}
	walk(newRootCmd())
}
