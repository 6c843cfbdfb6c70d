//go:build unix

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"syscall"

	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// Pause stops the server process with SIGSTOP: it keeps its connections and
// the requests sent to it, and answers nothing until Resume, when it serves
// them late (after their clients timed out and retried).
// It returns once the process is stopped: the signal is only delivered
// when the process next enters the kernel, and a request sent in between
// would be served.
func (p *serveProc) Pause() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatalf("pause server: %v", err)
	}
	stat := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	if _, err := os.Stat(stat); err != nil {
		return // no /proc here: the signal has to do
	}
	testwait.Until(p.t, "the paused server stopped", func() (bool, string) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false, err.Error()
		}
		// The state follows the command name's closing parenthesis.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Sprintf("stat %q", b)
		}
		return b[i+2] == 'T', "state " + string(b[i+2])
	})
}

// Resume continues a paused server process with SIGCONT.
func (p *serveProc) Resume() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		p.t.Fatalf("resume server: %v", err)
	}
}

// Stop ends the server with SIGTERM, as an operator's restart does, and
// waits for it to exit: it stops taking requests and finishes those it
// holds.
func (p *serveProc) Stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("stop server: %v", err)
	}
	if code := testproc.Wait(p.t, p.cmd); code != 0 {
		p.t.Fatalf("server %s exited with %d after SIGTERM", p.id, code)
	}
	p.kill = func() {}
}
