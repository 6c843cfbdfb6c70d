package rartest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testci"
)

// reader returns the path of a program from a Debian package, or skips
// (fails under CI, whose test script installs them).
func reader(t *testing.T, cmd, pkg string) string {
	t.Helper()
	return testci.Require(t, func() (string, string) {
		p, err := exec.LookPath(cmd)
		if err != nil {
			return "", cmd + " (Debian package " + pkg + ") is not installed"
		}
		return p, ""
	})
}

var files = []File{
	{Name: "Sample", Dir: true},
	{Name: "Sample/sample.mkv", Data: bytes.Repeat([]byte("sample\n"), 1000)},
	{Name: "Movie – naïve 日本.mkv", Data: []byte("movie data\n")},
	{Name: "movie.nfo", Data: []byte("nfo\r\n")},
}

var variants = []struct {
	name  string
	write func([]File, Options) []byte
	opt   Options
}{
	{"rar4", RAR4, Options{}},
	{"rar5", RAR5, Options{}},
	{"rar4 first volume", RAR4, Options{Volume: true}},
	{"rar5 first volume", RAR5, Options{Volume: true}},
	{"rar4 encrypted files", RAR4, Options{EncryptedFiles: true}},
	{"rar5 encrypted files", RAR5, Options{EncryptedFiles: true}},
	{"rar4 encrypted headers", RAR4, Options{EncryptedHeaders: true}},
	{"rar5 encrypted headers", RAR5, Options{EncryptedHeaders: true}},
}

// write puts an archive alone in a directory: unar takes sibling files
// whose names end in a number and .rar for volumes of one set.
func write(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "archive.rar")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// TestBsdtarReads lists every variant with libarchive's bsdtar and
// extracts a stored file from those it can read.
func TestBsdtarReads(t *testing.T) {
	t.Parallel()
	bsdtar := reader(t, "bsdtar", "libarchive-tools")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			p := write(t, v.write(files, v.opt))
			out, err := run(bsdtar, "-tf", p)
			if v.opt.EncryptedHeaders {
				// libarchive cannot decrypt: it must refuse, saying so.
				if err == nil || !strings.Contains(strings.ToLower(out), "encrypt") {
					t.Fatalf("bsdtar -tf of encrypted headers: %v\n%s", err, out)
				}
				t.Logf("bsdtar says: %s", strings.TrimSpace(out))
				return
			}
			if err != nil {
				t.Fatalf("bsdtar -tf: %v\n%s", err, out)
			}
			want := "Sample\nSample/sample.mkv\nMovie – naïve 日本.mkv\nmovie.nfo\n"
			if out != want {
				t.Fatalf("bsdtar -tf lists\n%s\nwant\n%s", out, want)
			}
			if v.opt.EncryptedFiles {
				return // listed; the data is not there to extract
			}
			for _, f := range files[1:] {
				data, err := exec.Command(bsdtar, "-xOf", p, f.Name).Output()
				if err != nil || !bytes.Equal(data, f.Data) {
					t.Fatalf("bsdtar -xOf %s: %v, %d bytes, want %d", f.Name, err, len(data), len(f.Data))
				}
			}
		})
	}
}

// TestUnarReads tests every variant with The Unarchiver's lsar: plain
// archives pass its CRC test (lsar -t), encrypted files are listed as
// encrypted, encrypted headers make it ask for a password.
func TestUnarReads(t *testing.T) {
	t.Parallel()
	lsar := reader(t, "lsar", "unar")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			p := write(t, v.write(files, v.opt))
			switch {
			case v.opt.EncryptedHeaders:
				out, err := run(lsar, p)
				if err == nil || !strings.Contains(out, "password") {
					t.Fatalf("lsar of encrypted headers: %v\n%s", err, out)
				}
				t.Logf("lsar says: %s", strings.TrimSpace(out))
			case v.opt.EncryptedFiles:
				out, err := run(lsar, "-l", p)
				if err != nil {
					t.Fatalf("lsar -l: %v\n%s", err, out)
				}
				for _, f := range files[1:] {
					if !strings.Contains(out, "---E-") || !strings.Contains(out, f.Name) {
						t.Fatalf("lsar -l does not list %s as encrypted:\n%s", f.Name, out)
					}
				}
			default:
				out, err := run(lsar, "-t", p)
				if err != nil || !strings.Contains(out, "4 passed, 0 failed") {
					t.Fatalf("lsar -t: %v\n%s", err, out)
				}
				for _, f := range files {
					if !strings.Contains(out, f.Name) {
						t.Fatalf("lsar -t does not name %s:\n%s", f.Name, out)
					}
				}
			}
		})
	}
}
