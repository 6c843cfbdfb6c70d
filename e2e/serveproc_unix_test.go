//go:build unix

package e2e

import "syscall"

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
