//go:build linux

package server

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// TestOutOfDescriptors: an open stream holds the descriptors Stats says it
// does, counted; and a server whose process runs out of file
// descriptors answers the open that hit the limit with a clear
// unavailable error, does not crash, and goes on serving the streams it
// holds open; once descriptors are free again a new stream opens. The
// limit is the process's, so it is lowered in a process of its own
// (TestOutOfDescriptorsChild) where no other test runs short.
func TestOutOfDescriptors(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfDescriptorsChild$", "-test.v")
	cmd.Env = append(os.Environ(), "PERSIST_OUT_OF_FDS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestOutOfDescriptorsChild")) {
		t.Fatalf("the child process: %v\n%s", err, out)
	}
}

func TestOutOfDescriptorsChild(t *testing.T) {
	if os.Getenv("PERSIST_OUT_OF_FDS_CHILD") == "" {
		t.Skip("run by TestOutOfDescriptors, in a process of its own")
	}
	// First, alone in this process, the descriptors an open stream holds
	// are counted (in /proc/self/fd) and held to Stats.OpenDescriptors,
	// which computes them.
	for _, exclusive := range []bool{false, true} {
		h := newHarness(t, func(c *Config) { c.ExclusiveFiles = exclusive })
		// The start's walk first: one that finds a stream file open with
		// its WAL reads the stream's name through a connection of its own,
		// and SQLite keeps that connection's descriptor open, for the locks
		// on the file, until the stream's own connection closes (under
		// load, runs counted 28 for 27: "warm"'s database twice).
		testwait.For(t, "the start's walk to finish", func() bool { return h.srv.Stats().Streams >= 0 })
		h.ok(persist.CmdSet, "warm", nil, []byte("v"))
		per := store.FilesPerOpenStream
		if exclusive {
			per = store.FilesPerExclusiveStream
		}
		for i := range 8 {
			h.ok(persist.CmdSet, "c"+strconv.Itoa(i), nil, []byte("v"))
		}
		// The descriptors of the stream files themselves, in the scope's
		// directory, against Stats: not the process's whole count, which
		// other work changes for a moment (the start's walk, a new
		// stream's copy of the template; a CI run once took its baseline
		// during one). Read in one wait, as Stats may lag the files by a
		// moment on a loaded machine.
		testwait.Until(t, "9 open streams' descriptors, counted by Stats", func() (bool, string) {
			files, d := streamDescriptorsNow(t, filepath.Join(h.dir, h.scope)), h.srv.Stats().OpenDescriptors
			held := len(files)
			return held == 9*per && d == int64(9*per), fmt.Sprintf("exclusive %v: Stats counts %d descriptors for 9 open streams, the process holds %d on their files, want %d: %v", exclusive, d, held, 9*per, files)
		})
		h.node.Stop()
	}

	// A cap far above what the descriptors allow: the limit, not the cap,
	// stops the opens.
	h := newHarness(t, func(c *Config) { c.ExclusiveFiles = true; c.MaxOpenStreams = 10_000 })
	h.ok(persist.CmdSet, "first", nil, []byte("v"))

	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
			t.Fatal(err)
		}
	}
	defer restore()
	// Room for about ten more open streams (two descriptors each).
	low := was
	low.Cur = uint64(openDescriptorsNow(t) + 20)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	refused := ""
	opened := 0
	for i := range 200 {
		r := h.req(persist.CmdSet, "s"+strconv.Itoa(i), nil, []byte("v"))
		if code := r.Header.Get(persist.HdrError); code != "" {
			if code != string(persist.CodeUnavailable) {
				t.Fatalf("stream %d refused %s: %s; want unavailable", i, code, r.Data)
			}
			refused = string(r.Data)
			break
		}
		opened++
	}
	if refused == "" {
		t.Fatalf("200 new streams opened with room for 20 descriptors")
	}
	if !strings.Contains(refused, "too many open files") || !strings.Contains(refused, "each open stream holds 2") || !strings.Contains(refused, "--max-open-streams") {
		t.Fatalf("refusal %q does not say why nor what to change", refused)
	}
	t.Logf("%d streams opened before the refusal: %s", opened, refused)
	// The open streams are still served, reads and writes.
	h.ok(persist.CmdSet, "first", nil, []byte("w"))
	if r := h.ok(persist.CmdGet, "s0", map[string]string{persist.HdrSeq: "1"}, nil); string(r.Data) != "v" {
		t.Fatalf("get of an open stream: %q", r.Data)
	}
	restore()
	h.ok(persist.CmdSet, "after", nil, []byte("v"))
}

// streamDescriptorsNow names the file of each descriptor the process has
// open on stream files (a database, its -wal or -shm) in dir, a scope's
// directory; a new stream's copy of the template, being written, is not
// one.
func streamDescriptorsNow(t *testing.T, dir string) []string {
	t.Helper()
	// The links in /proc name files by their resolved paths.
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || filepath.Dir(target) != dir || strings.Contains(filepath.Base(target), ".new-") {
			continue // closed meanwhile, or not a stream file here
		}
		files = append(files, filepath.Base(target))
	}
	return files
}

// openDescriptorsNow is how many descriptors the process has open.
func openDescriptorsNow(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
