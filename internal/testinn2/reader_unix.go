//go:build unix

package testinn2

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/syncbuf"
)

// NNRPD is the path of INN's reader daemon in the Debian package inn2.
const NNRPD = "/usr/lib/news/bin/nnrpd"

// readerStartTimeout bounds how long Reader waits for nnrpd's greeting.
const readerStartTimeout = 30 * time.Second

// Reader starts INN's reader daemon (nnrpd in standalone mode, in the
// foreground) on a free loopback port for t, stopped when t ends, and
// returns its host:port. It serves the same spool and groups as innd.
// nnrpd runs as the news user: Reader needs root (it switches to news) or
// to run as news. It skips like Addr when INN2 is not set up, and fails
// t when nnrpd cannot be started.
func Reader(t testing.TB) string {
	t.Helper()
	Addr(t)
	port, err := freePort()
	if err != nil {
		t.Fatalf("testinn2: %v", err)
	}
	cmd := exec.Command(NNRPD, "-D", "-f", "-4", "127.0.0.1", "-p", strconv.Itoa(port))
	// Its own process group: nnrpd forks a child per connection, and the
	// cleanup ends them with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		cred, err := newsUser()
		if err != nil {
			t.Fatalf("testinn2: %v", err)
		}
		cmd.SysProcAttr.Credential = cred
	}
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("testinn2: start nnrpd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := awaitGreeting(addr, exited); err != nil {
		t.Fatalf("testinn2: nnrpd on %s: %v; its output: %s", addr, err, out.String())
	}
	return addr
}

// awaitGreeting polls addr until it greets with 200/201, nnrpd exits or
// the start timeout passes. nnrpd gives no other sign that it listens.
func awaitGreeting(addr string, exited <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), readerStartTimeout)
	defer cancel()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	var last error
	for {
		if last = greet(ctx, addr); last == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited before greeting: %v (last try: %v)", err, last)
		case <-ctx.Done():
			return fmt.Errorf("no greeting within %v: %v", readerStartTimeout, last)
		case <-poll.C:
		}
	}
}

func greet(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	dl, _ := ctx.Deadline()
	nc.SetDeadline(dl)
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read greeting: %w", err)
	}
	if !strings.HasPrefix(line, "200") && !strings.HasPrefix(line, "201") {
		return fmt.Errorf("greeting %q", strings.TrimSpace(line))
	}
	fmt.Fprint(nc, "QUIT\r\n")
	return nil
}

// freePort finds a loopback port nobody listens on. Another process may
// take it before nnrpd binds it; nnrpd then exits and Reader says so.
func freePort() (int, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func newsUser() (*syscall.Credential, error) {
	u, err := user.Lookup("news")
	if err != nil {
		return nil, fmt.Errorf("nnrpd must run as news: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user news: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
