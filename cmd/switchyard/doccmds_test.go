package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestDocumentedCommandsExist reads every `switchyard ...` line in the code
// blocks of the README and docs/ and checks it against the command tree, so
// the docs cannot show commands, flags or argument counts the binary does
// not have (docs/persist.md once described limit commands that did not
// exist).
func TestDocumentedCommandsExist(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../../README.md")
	seen := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		inCode := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inCode = !inCode
				continue
			}
			line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			if !inCode || !strings.HasPrefix(line, "switchyard ") {
				continue
			}
			seen++
			if err := checkDocLine(line); err != nil {
				t.Errorf("%s:%d: %q: %v", filepath.Base(doc), i+1, line, err)
			}
		}
	}
	if seen == 0 {
		t.Fatal("found no switchyard command lines in the docs; is the path right?")
	}
}

// TestCheckDocLine: the checker above refuses what it must.
func TestCheckDocLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{"switchyard stream config hub log --set max_msgs=1000 --set max_age=24h", true},
		{"switchyard stream pub project-1 log 'first event'", true},
		{"switchyard kv set hub demo logo - < logo.png   # '-' reads stdin", true},
		{"switchyard stream del hub log --up-to 5000 | wc -l", true},
		{"switchyard balancer --ids 0,1,2,3 --placement rendezvous", true},
		{"switchyard nntp over GROUP [FIRST-LAST] --server host:port [--chunk 20000]", true},
		{"switchyard nntp over GROUP [--chunkk 20000]", false},
		{"switchyard stream limits hub log --max-msgs 5", false}, // no such command
		{"switchyard stream config hub log --sett max_msgs=1", false},
		{"switchyard kv get hub demo", false}, // one argument short
		{"switchyard persist serve --timeout 5s", false},
		{"switchyard up --log-format json --log-level debug", true},
		{"switchyard bench nntp --no-progress", true},
		{"switchyard kv keys hub demo --no-progress", false}, // bench's only
	} {
		if err := checkDocLine(c.line); (err == nil) != c.ok {
			t.Errorf("%q: err = %v, want ok = %v", c.line, err, c.ok)
		}
	}
}

// checkDocLine finds the command a documented line runs, and checks that
// it defines each --flag and accepts the positional arguments.
func checkDocLine(line string) error {
	words, err := shellWords(line)
	if err != nil {
		return err
	}
	// A synopsis marks optional parts with brackets: [--chunk 20000], [FIRST-LAST].
	for i, w := range words {
		words[i] = strings.TrimSuffix(strings.TrimPrefix(w, "["), "]")
	}
	c := newRootCmd()
	i := 1 // words[0] is "switchyard"
	for ; i < len(words); i++ {
		sub := findSub(c, words[i])
		if sub == nil {
			break
		}
		c = sub
	}
	var args []string
	for ; i < len(words); i++ {
		w := words[i]
		name, isFlag := strings.CutPrefix(w, "--")
		if !isFlag || w == "-" {
			args = append(args, w)
			continue
		}
		name, _, hasValue := strings.Cut(name, "=")
		f := lookupFlag(c, name)
		if f == nil {
			return fmt.Errorf("%s has no --%s", c.CommandPath(), name)
		}
		if !hasValue && f.Value.Type() != "bool" {
			i++ // the flag's value
		}
	}
	if c.Args != nil {
		if err := c.Args(c, args); err != nil {
			return fmt.Errorf("%s: %w", c.CommandPath(), err)
		}
	}
	return nil
}

// flagsMu serialises lookupFlag: InheritedFlags builds its set on first
// use, and the tests calling checkDocLine run in parallel.
var flagsMu sync.Mutex

// lookupFlag finds --name among c's own flags and the global ones it
// inherits (--log-format, bench's --no-progress).
func lookupFlag(c *cobra.Command, name string) *pflag.Flag {
	flagsMu.Lock()
	defer flagsMu.Unlock()
	if f := c.Flags().Lookup(name); f != nil {
		return f
	}
	if f := c.PersistentFlags().Lookup(name); f != nil {
		return f
	}
	return c.InheritedFlags().Lookup(name)
}

func findSub(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// shellWords splits a documented command line as a shell would for these
// simple lines: spaces separate words, quotes group them, and a comment,
// pipe or redirect ends the command.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case strings.ContainsRune("#|<>&;", r):
			if quote == 0 {
				goto done
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unbalanced %s", strconv.QuoteRune(quote))
	}
done:
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
