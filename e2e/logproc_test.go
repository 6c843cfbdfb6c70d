//go:build unix

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/work"
)

// logProc is a long-running child whose stderr (its slog lines) the test
// can wait on.
type logProc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  []string
	grew chan struct{} // closed and replaced on every new line
	done chan struct{} // closed when the process has exited
	code int
}

func startLogProc(t *testing.T, name string, args ...string) *logProc {
	t.Helper()
	p := &logProc{t: t, name: name, cmd: cli(t, args...), grew: make(chan struct{}), done: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log = append(p.log, sc.Text())
			close(p.grew)
			p.grew = make(chan struct{})
			p.mu.Unlock()
		}
		err := p.cmd.Wait()
		var ee *exec.ExitError
		p.mu.Lock()
		switch {
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
		case err != nil:
			p.code = -1
		}
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s log:\n%s", p.name, p.logText())
		}
	})
	return p
}

func (p *logProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, "\n")
}

// waitLog waits for a log line containing s.
func (p *logProc) waitLog(s string, within time.Duration) {
	p.t.Helper()
	deadline := time.After(within)
	for {
		p.mu.Lock()
		for _, l := range p.log {
			if strings.Contains(l, s) {
				p.mu.Unlock()
				return
			}
		}
		grew := p.grew
		p.mu.Unlock()
		select {
		case <-grew:
		case <-p.done:
			p.t.Fatalf("%s exited (code %d) before logging %q:\n%s", p.name, p.code, s, p.logText())
		case <-deadline:
			p.t.Fatalf("%s: no %q within %s:\n%s", p.name, s, within, p.logText())
		}
	}
}

func (p *logProc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

// exit waits for the process to end and returns its exit code.
func (p *logProc) exit(within time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(within):
		p.t.Fatalf("%s still running %s after it was told to stop:\n%s", p.name, within, p.logText())
		return -1
	}
}

// waitStatus polls the source's status until cond holds, and returns the
// status it held in.
func waitStatus(t *testing.T, st *work.Store, what string, cond func(work.Status) bool) work.Status {
	t.Helper()
	return waitStatusWithin(t, st, testwait.Timeout, what, cond)
}

// waitStatusWithin is waitStatus for a condition that takes longer than
// testwait.Timeout to come true.
func waitStatusWithin(t *testing.T, st *work.Store, within time.Duration, what string, cond func(work.Status) bool) work.Status {
	t.Helper()
	var held work.Status
	testwait.UntilWithin(t, within, what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := st.Status(ctx)
		if err != nil {
			return false, fmt.Sprintf("status: %v", err)
		}
		held = s
		return cond(s), fmt.Sprintf("status %+v", s)
	})
	return held
}

// indexed adds up the counting indexer's results over the source's done
// ranges, and returns them with every range.
func indexed(t *testing.T, st *work.Store) (map[string]work.GroupCount, []work.Range) {
	t.Helper()
	rs, err := st.Ranges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var all []work.Range
	for _, r := range rs {
		all = append(all, r.Val)
	}
	got, err := work.SumResults(all)
	if err != nil {
		t.Fatal(err)
	}
	return got, all
}

// expectedCounts is what the counting indexer must report for groups whose
// articles are 1..n: every article once.
func expectedCounts(groups []string, n int64) map[string]work.GroupCount {
	want := map[string]work.GroupCount{}
	for _, g := range groups {
		var c work.GroupCount
		for a := int64(1); a <= n; a++ {
			c.Add(work.GroupCount{Articles: 1, Sum: work.ArticleDigest(g, a)})
		}
		want[g] = c
	}
	return want
}
