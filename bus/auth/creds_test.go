package auth_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/bus/auth"
)

// TestCredsModeIsChecked: a creds file any other account may open is
// refused with the chmod that fixes it, unless AnyMode says to go on;
// the modes auth init writes (0600) and tighter load.
func TestCredsModeIsChecked(t *testing.T) {
	t.Parallel()
	data := auth.Creds{User: "acme", Password: "secret", Inbox: "_INBOX_acme"}.Marshal("test")
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o644, false}, {0o640, false}, {0o604, false}, {0o620, false}, {0o666, false}} {
		t.Run(strconv.FormatUint(uint64(c.mode), 8), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "acme.creds")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.mode); err != nil {
				t.Fatal(err)
			}
			_, err := auth.LoadCreds(path)
			if c.ok {
				if err != nil {
					t.Fatalf("mode %#o refused: %v", c.mode, err)
				}
				return
			}
			var me *auth.ModeError
			if !errors.As(err, &me) || me.Mode != c.mode {
				t.Fatalf("mode %#o: %v, want a *ModeError with that mode", c.mode, err)
			}
			if msg := err.Error(); !strings.HasSuffix(msg, ": chmod 600 "+path) || strings.Contains(msg, "\n") {
				t.Fatalf("mode %#o: %q, want one line ending in chmod 600 %s", c.mode, msg, path)
			}
			if _, err := auth.ClientOptions(path, ""); !errors.As(err, &me) {
				t.Fatalf("ClientOptions of mode %#o: %v, want a *ModeError", c.mode, err)
			}
			got, err := auth.LoadCreds(path, auth.AnyMode())
			if err != nil || got.User != "acme" {
				t.Fatalf("mode %#o with AnyMode: %+v, %v", c.mode, got, err)
			}
			if _, err := auth.ClientOptions(path, "", auth.AnyMode()); err != nil {
				t.Fatalf("ClientOptions of mode %#o with AnyMode: %v", c.mode, err)
			}
		})
	}
}

// TestCredsModeErrorQuotesOddPaths: the chmod line pastes into a shell,
// so a path with a space or a control character comes quoted, and the
// control character escaped rather than raw on the terminal.
func TestCredsModeErrorQuotesOddPaths(t *testing.T) {
	t.Parallel()
	e := &auth.ModeError{Path: "/tmp/my creds\x1b", Mode: 0o644}
	if got, want := e.Error(), `creds $'/tmp/my creds\033' is open to other users (mode 0644): chmod 600 $'/tmp/my creds\033'`; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	e = &auth.ModeError{Path: "/tmp/my creds", Mode: 0o644}
	if got, want := e.Error(), `creds '/tmp/my creds' is open to other users (mode 0644): chmod 600 '/tmp/my creds'`; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// TestCredsModeErrorChmodLinePastesIntoShell: a shell reads the chmod
// line's file back as the path, whatever the path holds. (Was: the path
// came in Go's double quotes, inside which a shell expands $VAR and `cmd`:
// the pasted line named another file, or ran a command.)
func TestCredsModeErrorChmodLinePastesIntoShell(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, path := range []string{"/tmp/my $HOME/acme.creds", "/tmp/a`echo x`b/acme.creds", "/tmp/it's/acme.creds"} {
		msg := (&auth.ModeError{Path: path, Mode: 0o644}).Error()
		i := strings.LastIndex(msg, "chmod 600 ")
		if i < 0 {
			t.Fatalf("%q has no chmod line", msg)
		}
		word := msg[i+len("chmod 600 "):]
		out, err := exec.Command(sh, "-c", "printf '%s' "+word).Output()
		if err != nil {
			t.Fatalf("sh could not read %s: %v", word, err)
		}
		if string(out) != path {
			t.Errorf("chmod line %q: a shell reads the file as %q, not %q", "chmod 600 "+word, out, path)
		}
	}
}
