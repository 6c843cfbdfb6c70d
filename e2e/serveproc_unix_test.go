//go:build unix

package e2e

import (
	"syscall"

	"github.com/switchyard-dev/switchyard/internal/testproc"
)

// Pause stops the server process with SIGSTOP: it keeps its connections and
// the requests sent to it, and answers nothing until Resume, when it serves
// them late (after their clients timed out and retried).
func (p *serveProc) Pause() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatalf("pause server: %v", err)
	}
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
