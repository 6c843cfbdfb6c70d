// Package testproc runs child processes for a test: to completion with
// their output and exit code, or in the background until they print that
// they are ready, and then until they exit. The CLI tests of cmd/switchyard
// and the system tests of e2e run the switchyard command with it.
package testproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Timeout is how long Start waits for the ready line, and Wait for
// the process to exit.
const Timeout = 30 * time.Second

// Run runs cmd to completion and returns its stdout, stderr and exit code.
// A command that cannot run at all fails t.
func Run(t testing.TB, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return out.String(), errb.String(), code
}

// Start starts cmd and waits until a line of its stdout contains ready;
// the rest of stdout keeps draining in the background. It fails t, with
// the process's stderr, if the process exits first or Timeout passes.
func Start(t testing.TB, cmd *exec.Cmd, ready string) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), ready) {
				ok = true
				found <- true
			}
		}
		if !ok {
			found <- false
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case ok := <-found:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("%v exited before %q; stderr: %s", cmd.Args, ready, stderr.String())
		}
	case <-time.After(Timeout):
		_ = cmd.Process.Kill()
		t.Fatalf("%v: no %q within %v; stderr: %s", cmd.Args, ready, Timeout, stderr.String())
	}
}

// Wait waits for a started cmd to exit and returns its exit code; after
// Timeout it kills the process and fails t.
func Wait(t testing.TB, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		t.Fatalf("%v did not exit within %v", cmd.Args, Timeout)
		return -1
	}
}

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago, for a
// child process to listen on. Another process may take it in between: a
// test that restarts a listener picks a new port rather than reuse one.
// The kernel may hand the same free port out twice in a row, so a port
// this process has handed out before is never returned again: two
// FreePort calls of one test (a bus port and an HTTP port) always differ.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if _, dup := handedOut.LoadOrStore(port, true); !dup {
			return port
		}
	}
	t.Fatal("no free port that was not handed out before")
	return 0
}

// handedOut holds every port FreePort has returned in this process.
var handedOut sync.Map
