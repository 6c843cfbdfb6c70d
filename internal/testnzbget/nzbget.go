// Package testnzbget runs NZBGet, a real downloader, for round-trip tests,
// on a private configuration whose directories are all under the test's
// temporary directory: Download runs its standalone mode (download the NZB
// given on the command line, then exit); StartDaemon runs it as a server
// with RSS feeds, driven over its JSON-RPC API (previewfeed, fetchfeed,
// history), as a user's NZBGet reads an indexer's feed.
package testnzbget

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testci"
)

// Binary is the NZBGet executable's name (Debian package nzbget).
const Binary = "nzbget"

// ConnectionsDefault is Server.Connections' default: a few, so NZBGet
// fetches in parallel as it does for real, on a CI runner's 2 cores.
const ConnectionsDefault = 2

// Server is the news server NZBGet downloads from.
type Server struct {
	Host string
	Port int
	// User and Pass, when User is set, log in with AUTHINFO.
	User, Pass string
	// TLS connects with TLS from the first byte (NZBGet has no STARTTLS);
	// the certificate is not checked, test servers use their own.
	TLS bool
	// Connections NZBGet opens. Zero means ConnectionsDefault.
	Connections int
	// ParRename lets NZBGet rename the downloaded files by the MD5s of
	// their first 16 KiB in the par2 index (its own default, and how it
	// names a post whose articles carry obfuscated yEnc names: NZBGet 21
	// names a file by its articles, not by the NZB). Off, files keep the
	// names their articles give.
	ParRename bool
}

// Available reports the NZBGet binary's path, or why it is missing.
func Available() (path, why string) {
	p, err := exec.LookPath(Binary)
	if err != nil {
		return "", "nzbget is not installed (Debian package nzbget; scripts/test.sh installs it when run as root): " + err.Error()
	}
	return p, ""
}

// Require returns the NZBGet path, or skips t saying why when it is
// missing; under CI=true a missing NZBGet fails t instead, so CI cannot
// pass without running the round trip.
func Require(t testing.TB) string {
	t.Helper()
	return testci.Require(t, Available)
}

// Download runs NZBGet on nzbPath against server and waits for it to exit
// (killing it when ctx ends: NZBGet does not exit on a bad configuration,
// it pauses and waits) and returns the directory holding the
// downloaded files. NZBGet par-checks every download (ParCheck=force, so
// all par2 files are fetched too) and unpacks nothing. The error of a
// failed run includes the end of NZBGet's log.
func Download(ctx context.Context, t testing.TB, nzbPath string, server Server) (string, error) {
	t.Helper()
	bin, why := Available()
	if bin == "" {
		return "", errors.New("testnzbget: " + why)
	}
	main := t.TempDir()
	conf, err := writeConfig(main, options(main, server))
	if err != nil {
		return "", err
	}
	nzb, err := filepath.Abs(nzbPath)
	if err != nil {
		return "", fmt.Errorf("testnzbget: %w", err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-c", conf, nzb)
	cmd.Dir = main
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Stdin = nil
	// After a kill, do not wait long for pipes a stray child might hold.
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err = cmd.Run()
	t.Logf("nzbget ran for %v", time.Since(start).Round(time.Millisecond))
	logText := tail(filepath.Join(main, "nzbget.log"), out.Bytes())
	if ctx.Err() != nil {
		return "", fmt.Errorf("testnzbget: nzbget did not finish: %w\n%s", ctx.Err(), logText)
	}
	if err != nil {
		return "", fmt.Errorf("testnzbget: nzbget: %w\n%s", err, logText)
	}
	// NZBGet exits 0 after a failed download too: its log says how it went.
	if bad := failures(filepath.Join(main, "nzbget.log")); bad != "" {
		return "", fmt.Errorf("testnzbget: nzbget reported failures:\n%s\n%s", bad, logText)
	}
	dir, err := resultDir(filepath.Join(main, "dst"))
	if err != nil {
		return "", fmt.Errorf("testnzbget: %w\n%s", err, logText)
	}
	return dir, nil
}

// writeConfig writes opts as main/nzbget.conf, beside the empty
// configuration template NZBGet wants, and returns the config's path.
func writeConfig(main string, opts [][2]string) (string, error) {
	var b bytes.Buffer
	for _, o := range opts {
		fmt.Fprintf(&b, "%s=%s\n", o[0], o[1])
	}
	conf := filepath.Join(main, "nzbget.conf")
	if err := os.WriteFile(conf, b.Bytes(), 0o600); err != nil {
		return "", fmt.Errorf("testnzbget: write config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(main, "template.conf"), nil, 0o600); err != nil {
		return "", fmt.Errorf("testnzbget: write config template: %w", err)
	}
	return conf, nil
}

// options are a minimal nzbget.conf: every directory under main, one
// server, nothing that listens, scans, unpacks or runs scripts. The daemon
// changes the control server's and adds its feeds.
func options(main string, s Server) [][2]string {
	if s.Connections <= 0 {
		s.Connections = ConnectionsDefault
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	opts := [][2]string{
		{"MainDir", main},
		{"DestDir", "${MainDir}/dst"},
		{"InterDir", "${MainDir}/inter"},
		{"NzbDir", "${MainDir}/nzb"},
		{"QueueDir", "${MainDir}/queue"},
		{"TempDir", "${MainDir}/tmp"},
		{"ScriptDir", "${MainDir}/scripts"},
		{"LockFile", "${MainDir}/nzbget.lock"},
		{"LogFile", "${MainDir}/nzbget.log"},
		{"WebDir", ""},
		// An empty template: without one NZBGet logs "Could not read
		// configuration templates" as an error on every start.
		{"ConfigTemplate", "${MainDir}/template.conf"},
		{"Server1.Active", "yes"},
		{"Server1.Name", "test"},
		{"Server1.Level", "0"},
		{"Server1.Host", s.Host},
		{"Server1.Port", strconv.Itoa(s.Port)},
		{"Server1.Username", s.User},
		{"Server1.Password", s.Pass},
		{"Server1.JoinGroup", "no"},
		{"Server1.Encryption", yes(s.TLS)},
		{"Server1.Connections", strconv.Itoa(s.Connections)},
		{"Server1.Retention", "0"},
		{"CertCheck", "no"},
		// The control server only runs in server mode (the daemon sets
		// its port); bind it to loopback regardless.
		{"ControlIP", "127.0.0.1"},
		{"ControlPort", "0"},
		{"UpdateCheck", "none"},
		{"NzbDirInterval", "0"},
		{"AppendCategoryDir", "no"},
		{"DupeCheck", "no"},
		{"FlushQueue", "no"},
		{"ContinuePartial", "no"},
		{"DirectWrite", "yes"},
		{"ArticleCache", "0"},
		{"DiskSpace", "0"},
		{"CrcCheck", "yes"},
		// A missing article should fail the run quickly, not after
		// minutes of retries.
		{"ArticleRetries", "1"},
		{"ArticleInterval", "1"},
		{"ArticleTimeout", "30"},
		{"ParCheck", "force"},
		{"ParRepair", "yes"},
		{"ParScan", "limited"},
		{"ParRename", yes(s.ParRename)},
		{"RarRename", "no"},
		{"DirectRename", "no"},
		{"HealthCheck", "none"},
		{"Unpack", "no"},
		{"DirectUnpack", "no"},
		{"ExtCleanupDisk", ""},
		{"ScriptOrder", ""},
		{"Extensions", ""},
		{"OutputMode", "log"},
		{"WriteLog", "append"},
		{"DetailTarget", "log"},
		{"NzbLog", "no"},
		{"CrashTrace", "no"},
	}
	return opts
}

// resultDir finds where NZBGet put the download: DestDir/<nzb name>.
func resultDir(dest string) (string, error) {
	entries, err := os.ReadDir(dest)
	if err != nil {
		return "", fmt.Errorf("no download directory: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(dest, e.Name()))
		}
	}
	if len(dirs) != 1 {
		return "", fmt.Errorf("%d directories in %s, want the one download", len(dirs), dest)
	}
	return dirs[0], nil
}

// failures returns the log lines that mean the download is incomplete or
// damaged: errors, and warnings of failure (such as "1 of 4 article
// downloads failed", or a failed par-check or repair).
func failures(logPath string) string {
	b, _ := os.ReadFile(logPath)
	var bad []string
	for _, l := range strings.Split(string(b), "\n") {
		_, rest, _ := strings.Cut(l, "\t") // after the date
		level, msg, _ := strings.Cut(rest, "\t")
		switch {
		case level == "ERROR",
			level == "WARNING" && (strings.Contains(msg, "failed") || strings.Contains(msg, "damaged")):
			bad = append(bad, l)
		}
	}
	return strings.Join(bad, "\n")
}

// tail returns the last lines of the log file, or of the console output
// when there is no log file.
func tail(logPath string, console []byte) string {
	b, err := os.ReadFile(logPath)
	if err != nil || len(b) == 0 {
		b = console
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return "nzbget log (last lines):\n" + strings.Join(lines, "\n")
}
