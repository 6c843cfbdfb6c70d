//go:build linux

package store

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

// TestOutOfDescriptorsProbe: SQLite's "unable to open database file" says
// nothing of descriptors, so the probe decides, and it must still say yes
// when a descriptor or two came free between the failed open and the
// probe (SQLite closes what the failed open had opened): CI saw the
// refusal read "cannot open stream file" for that. The limit is the
// process's, so it is lowered in a process of its own.
func TestOutOfDescriptorsProbe(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfDescriptorsProbeChild$", "-test.v")
	cmd.Env = append(os.Environ(), "STORE_OUT_OF_FDS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestOutOfDescriptorsProbeChild")) {
		t.Fatalf("the child process: %v\n%s", err, out)
	}
}

func TestOutOfDescriptorsProbeChild(t *testing.T) {
	if os.Getenv("STORE_OUT_OF_FDS_CHILD") == "" {
		t.Skip("run by TestOutOfDescriptorsProbe, in a process of its own")
	}
	cantOpen := errors.New("open stream: unable to open database file (14)")
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
			t.Fatal(err)
		}
	}()
	for _, c := range []struct {
		free int
		want bool
	}{
		{0, true},
		{1, true}, // the database's descriptor, closed again by SQLite
		{FilesPerExclusiveStream, true},
		{FilesPerExclusiveStream + 8, false},
	} {
		// The limit bounds descriptor numbers, not their count: set it
		// at the highest open one, fill the holes below it, then raise
		// it by exactly the descriptors to leave free.
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		highest := 0
		for _, e := range ents {
			if n, err := strconv.Atoi(e.Name()); err == nil && n > highest {
				highest = n
			}
		}
		low := was
		low.Cur = uint64(highest + 1)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Fatal(err)
		}
		var fillers []*os.File
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				break
			}
			fillers = append(fillers, f)
		}
		low.Cur += uint64(c.free)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Fatal(err)
		}
		got := outOfDescriptors(cantOpen, FilesPerExclusiveStream)
		for _, f := range fillers {
			f.Close()
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("with %d descriptors free: out of descriptors %v, want %v", c.free, got, c.want)
		}
	}
	if !outOfDescriptors(syscall.EMFILE, FilesPerExclusiveStream) {
		t.Error("EMFILE itself is not out of descriptors")
	}
	if outOfDescriptors(cantOpen, FilesPerExclusiveStream) {
		t.Error("at the usual limit, a failed open is out of descriptors")
	}
}
