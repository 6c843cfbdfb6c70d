package auth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Environment variables that stand in for --creds and --tls-ca.
const (
	EnvCreds = "SWITCHYARD_CREDS"
	EnvTLSCA = "SWITCHYARD_TLS_CA"
)

// Creds is what one connection needs to log in. A creds file is plain text,
// one "key: value" per line, '#' starts a comment:
//
//	# switchyard bus credentials for tenant acme
//	user: acme
//	password: 3q5...
//	inbox: _INBOX_acme
//
// An NKey user has "nkey: SU..." (its seed) instead of user and password.
// inbox is the reply-subject prefix the user is allowed to read.
type Creds struct {
	User     string
	Password string
	Seed     string // NKey seed; set instead of User and Password
	Inbox    string
}

// Marshal renders c in the creds file format, with comment as the first line.
func (c Creds) Marshal(comment string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n# Secret: keep this file readable by its owner only.\n", comment)
	if c.Seed != "" {
		fmt.Fprintf(&b, "nkey: %s\n", c.Seed)
	} else {
		fmt.Fprintf(&b, "user: %s\npassword: %s\n", c.User, c.Password)
	}
	if c.Inbox != "" {
		fmt.Fprintf(&b, "inbox: %s\n", c.Inbox)
	}
	return b.Bytes()
}

// ParseCreds reads the creds file format.
func ParseCreds(data []byte) (Creds, error) {
	var c Creds
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return Creds{}, fmt.Errorf("line %d: want \"key: value\"", n)
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "user":
			c.User = v
		case "password":
			c.Password = v
		case "nkey":
			c.Seed = v
		case "inbox":
			c.Inbox = v
		default:
			return Creds{}, fmt.Errorf("line %d: unknown key %q (want user, password, nkey or inbox)", n, k)
		}
	}
	if err := sc.Err(); err != nil {
		return Creds{}, err
	}
	switch {
	case c.Seed != "" && (c.User != "" || c.Password != ""):
		return Creds{}, errors.New("give either nkey or user and password, not both")
	case c.Seed == "" && (c.User == "" || c.Password == ""):
		return Creds{}, errors.New("missing user and password (or nkey)")
	}
	if c.Seed != "" {
		if _, err := nkeys.FromSeed([]byte(c.Seed)); err != nil {
			return Creds{}, fmt.Errorf("nkey: %w", err)
		}
	}
	if strings.ContainsAny(c.Inbox, ".*> \t") {
		return Creds{}, fmt.Errorf("inbox %q must be one subject token", c.Inbox)
	}
	return c, nil
}

// ModeError is the error of a secret's file (a creds file, a region
// secrets file) that group or others may read or write: its secret is then
// no secret. Callers that offer a way round it (a flag) say so next to the
// error.
type ModeError struct {
	Path string
	Mode fs.FileMode // the permission bits found
	What string      // what the file is, for the message; "" means creds
}

func (e *ModeError) Error() string {
	p, what := shellWord(e.Path), e.What
	if what == "" {
		what = "creds"
	}
	return fmt.Sprintf("%s %s is open to other users (mode %#o): chmod 600 %s", what, p, e.Mode, p)
}

// CheckMode refuses, with a *ModeError naming the file as what, a secret's
// file that group or others may read or write, as creds files are
// refused; fi is the file's. Pipes, devices and Windows pass (see
// checkMode).
func CheckMode(what, path string, fi os.FileInfo) error {
	err := checkMode(path, fi)
	if me, ok := err.(*ModeError); ok {
		me.What = what
	}
	return err
}

// shellWord is path as a user can paste it into a shell: as it is when it
// holds only characters a shell takes literally, else in single quotes,
// inside which a POSIX shell expands nothing ($HOME and `cmd` stay text;
// a ' in the path ends the quotes, comes escaped, and opens them again),
// where in double quotes it would expand $ and ` and name another file. A
// path holding what a terminal does not print as text (a control
// character, invalid UTF-8) is $'...' instead (bash, zsh, ksh,
// POSIX.1-2024), each such byte an octal escape: raw, it would reach the
// terminal.
func shellWord(path string) string {
	literal := path != ""
	for _, r := range path {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%=", r)) {
			literal = false
			break
		}
	}
	if literal {
		return path
	}
	if utf8.ValidString(path) && strings.IndexFunc(path, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return "'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(path); {
		r, n := utf8.DecodeRuneInString(path[i:])
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == utf8.RuneError && n == 1 || !unicode.IsPrint(r):
			// Three digits always: a digit after the escape stays a digit.
			for _, c := range []byte(path[i : i+n]) {
				fmt.Fprintf(&b, `\%03o`, c)
			}
		default:
			b.WriteString(path[i : i+n])
		}
		i += n
	}
	b.WriteByte('\'')
	return b.String()
}

// A LoadOption changes how LoadCreds and ClientOptions treat a creds file.
type LoadOption func(*loadConfig)

type loadConfig struct {
	anyMode bool
}

// AnyMode loads a creds file whatever its permission bits, for a user who
// says so (--insecure-creds): a file on a share that cannot hold modes.
func AnyMode() LoadOption { return func(c *loadConfig) { c.anyMode = true } }

// LoadCreds reads a creds file. A regular file that group or others may
// read or write is refused with a *ModeError, a one-line error saying
// "chmod 600 FILE", unless AnyMode is given. The check is the one ssh makes
// of a private key: auth init writes 0600, so a wider mode means a copy
// that leaked its secret to every account on the machine.
func LoadCreds(path string, opts ...LoadOption) (Creds, error) {
	var cfg loadConfig
	for _, o := range opts {
		o(&cfg)
	}
	f, err := os.Open(path)
	if err != nil {
		return Creds{}, fmt.Errorf("read creds: %w", err)
	}
	defer f.Close()
	// The mode of the file opened, not of the name: it cannot change
	// between the check and the read.
	fi, err := f.Stat()
	if err != nil {
		return Creds{}, fmt.Errorf("read creds: %w", err)
	}
	if !cfg.anyMode {
		if err := checkMode(path, fi); err != nil {
			return Creds{}, err
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return Creds{}, fmt.Errorf("read creds: %w", err)
	}
	c, err := ParseCreds(data)
	if err != nil {
		return Creds{}, fmt.Errorf("creds %q: %w", path, err)
	}
	return c, nil
}

// checkMode refuses a regular file with any group or other permission bit.
// Pipes and devices (--creds <(...), /dev/stdin) hold no copy of the
// secret to protect, and Windows has no such bits, so both are let through.
func checkMode(path string, fi os.FileInfo) error {
	if runtime.GOOS == "windows" || !fi.Mode().IsRegular() {
		return nil
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return &ModeError{Path: path, Mode: perm}
	}
	return nil
}

// Options are the nats.go options that log in with c and use its inbox.
func (c Creds) Options() ([]nats.Option, error) {
	var opts []nats.Option
	if c.Seed != "" {
		kp, err := nkeys.FromSeed([]byte(c.Seed))
		if err != nil {
			return nil, fmt.Errorf("nkey: %w", err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("nkey: %w", err)
		}
		opts = append(opts, nats.Nkey(pub, kp.Sign))
	} else {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.Inbox))
	}
	return opts, nil
}

// ClientOptions are the nats.go options for a creds file and a CA file,
// either of which may be "" (not used). The creds file is loaded by
// LoadCreds with load.
func ClientOptions(credsPath, caPath string, load ...LoadOption) ([]nats.Option, error) {
	var opts []nats.Option
	if credsPath != "" {
		c, err := LoadCreds(credsPath, load...)
		if err != nil {
			return nil, err
		}
		if opts, err = c.Options(); err != nil {
			return nil, fmt.Errorf("creds %q: %w", credsPath, err)
		}
	}
	if caPath != "" {
		if _, err := os.Stat(caPath); err != nil {
			return nil, fmt.Errorf("tls ca: %w", err)
		}
		opts = append(opts, nats.RootCAs(caPath))
	}
	return opts, nil
}

// NewPassword returns a random password (256 bits, URL-safe base64).
func NewPassword() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// NewNkey returns a new NKey user: its seed (for the creds file) and public
// key (for the server configuration).
func NewNkey() (seed, public string, err error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", "", fmt.Errorf("create nkey: %w", err)
	}
	s, err := kp.Seed()
	if err != nil {
		return "", "", fmt.Errorf("create nkey: %w", err)
	}
	p, err := kp.PublicKey()
	if err != nil {
		return "", "", fmt.Errorf("create nkey: %w", err)
	}
	return string(s), p, nil
}
