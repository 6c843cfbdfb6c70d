package main

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTerminalSafe: the last printer escapes whatever a terminal would act
// on, and leaves printable text, quotes and backslashes as they are.
func TestTerminalSafe(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"plain text: ok", "plain text: ok"},
		{`stream name "a\x1b[31mRED"`, `stream name "a\x1b[31mRED"`},
		{"a\x1b[31mRED", `a\x1b[31mRED`},
		{"two\nlines\r\ttab", `two\nlines\r\ttab`},
		{"bell\a del\x7f", `bell\a del\x7f`},
		{"c1 \u009b2J", `c1 \u009b2J`},
		{"bidi \u202egnp.exe", `bidi \u202egnp.exe`},
		{"bad utf-8 \xff\xfe", `bad utf-8 \xff\xfe`},
		{"umlaut ü and 日本 and \ufffd", "umlaut ü and 日本 and \ufffd"},
	}
	for _, c := range cases {
		if got := terminalSafe(c.in); got != c.want {
			t.Errorf("terminalSafe(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestExitCodeEscapes: an error holding raw control characters, wherever it
// came from, prints as one escaped line.
func TestExitCodeEscapes(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	exitCode(&b, errors.New("open a\x1b]0;pwned\a\nswitchyard: fake"))
	if got, want := b.String(), "switchyard: open a\\x1b]0;pwned\\a\\nswitchyard: fake\n"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
}

// TestErrorsQuoteNames runs the commands of the terminal injection report
// with names carrying ESC against a real server: each fails on one line
// that names the stream quoted, and no control byte reaches stderr raw. A
// stream name is refused before any request (checkStream), as the scope
// and the key are.
func TestErrorsQuoteNames(t *testing.T) {
	t.Parallel()
	e, _ := startFleet(t, t.TempDir())
	url := e.ClientURL()
	const name = "a\x1b[31mRED"
	const stream = `switchyard: STREAM "a\x1b[31mRED": bad-request`
	cases := []struct {
		args []string
		want string // stderr starts with it
	}{
		{[]string{"stream", "pub", "sec", name, "v"}, stream},
		{[]string{"stream", "ls", "sec", name}, stream},
		{[]string{"stream", "get", "sec", name, "1"}, stream},
		{[]string{"stream", "del", "sec", name, "--all"}, stream},
		{[]string{"stream", "config", "sec", name}, stream},
		{[]string{"stream", "config", "sec", name, "--set", "max_msgs=5"}, stream},
		{[]string{"persist", "inventory", "sec", name}, stream},
		{[]string{"kv", "set", "sec", name, "k", "v"}, stream},
		{[]string{"kv", "get", "sec", name, "k"}, stream},
		{[]string{"kv", "del", "sec", name, "k"}, stream},
		{[]string{"kv", "keys", "sec", name}, stream},
		{[]string{"watch", "sec", name}, stream},
		{[]string{"kv", "get", "sec", "s", name}, `switchyard: KEY "a\x1b[31mRED"`},
		{[]string{"kv", "get", name, "s", "k"}, `switchyard: invalid scope "a\x1b[31mRED"`},
		{[]string{"stream", "pub", "sec", "s", "v", "--" + name}, `switchyard: unknown flag: --a\x1b[31mRED`},
		{[]string{name}, `switchyard: unknown command "a\x1b[31mRED"`},
	}
	for _, c := range cases {
		args := c.args
		if len(args) > 1 {
			args = append(args, "--nats", url)
		}
		_, stderr, code := execute(t, args...)
		if code == 0 {
			t.Errorf("%q: exit 0", args)
		}
		if !strings.HasPrefix(stderr, c.want) {
			t.Errorf("%q: stderr %q, want it to start with %q", args, stderr, c.want)
		}
		body := strings.TrimSuffix(stderr, "\n")
		if i := strings.IndexFunc(body, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
			t.Errorf("%q: stderr holds the raw byte %#x: %q", args, body[i], stderr)
		}
	}
}

// noControl fails t if a line of s holds a rune a terminal acts on or
// shows as something else (tabs aside, which separate columns): C0
// controls, DEL, C1 controls, bidi overrides and isolates.
func noControl(t *testing.T, what, s string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if i := strings.IndexFunc(line, rawControl); i >= 0 {
			r, _ := utf8.DecodeRuneInString(line[i:])
			t.Errorf("%s prints the raw %U: %q", what, r, line)
		}
	}
}

// rawControl reports whether a terminal acts on r, or shows it as
// something else, when printed raw (a tab aside).
func rawControl(r rune) bool {
	switch {
	case r == '\t':
		return false
	case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
