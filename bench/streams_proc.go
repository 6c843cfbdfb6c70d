package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServerModule is the module whose nats-server the many-streams
// benchmark runs as JetStream's side: the one switchyard embeds.
const natsServerModule = "github.com/nats-io/nats-server/v2"

// FindNATSServer is the nats-server binary to run: explicit when given,
// else nats-server on PATH, else one built (once, into the user's cache
// directory) from the nats-server module at the version this binary was
// built with, so both sides run the same server code.
func FindNATSServer(ctx context.Context, explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("--nats-server: %w", err)
		}
		return explicit, nil
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p, nil
	}
	version := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == natsServerModule {
				version = d.Version
				if d.Replace != nil {
					version = d.Replace.Version
				}
			}
		}
	}
	if version == "" {
		return "", errors.New("no nats-server on PATH and no version of " + natsServerModule + " in this binary's build info: give --nats-server")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no nats-server on PATH, and no cache directory to build one in (give --nats-server): %w", err)
	}
	bin := filepath.Join(cache, "switchyard", "nats-server-"+version)
	out := filepath.Join(bin, "nats-server")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	// go install pkg@version builds from the module cache (or the proxy)
	// wherever it runs, with no go.mod around it.
	cmd := exec.CommandContext(ctx, "go", "install", natsServerModule+"@"+version)
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("no nats-server on PATH; building %s@%s failed (give --nats-server): %w: %s", natsServerModule, version, err, b)
	}
	return out, nil
}

// child is a server process the benchmark started: it is stopped with
// SIGTERM, as an operator stops one, and its output goes to a log file.
type child struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

// startChild runs bin with args (and env added to ours), its stdout and
// stderr appended to logPath.
func startChild(name, logPath, bin string, args, env []string) (*child, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited is the error to report when the process ended before it should.
func (c *child) exited() error {
	select {
	case <-c.done:
		tail, _ := os.ReadFile(c.log.Name())
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("%s exited (%v); its log ends: %s", c.name, c.err, tail)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits for the exit, killing the process after
// grace. It returns how long the clean stop took.
func (c *child) stop(grace time.Duration) (time.Duration, error) {
	start := time.Now()
	select {
	case <-c.done:
		return 0, nil
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("stop %s: %w", c.name, err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return time.Since(start), nil
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
		return time.Since(start), fmt.Errorf("stop %s: still running %s after SIGTERM, killed", c.name, grace)
	}
}

// freePort is a loopback TCP port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitPort polls until something accepts on port, c exits or timeout ends.
func waitPort(c *child, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if err := c.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: nothing listens on port %d after %s", c.name, port, timeout)
		}
		<-tick.C
	}
}

// diskUsage is what du reports for the files under dirs: allocated blocks,
// not lengths, so sparse and preallocated files count as they cost.
func diskUsage(dirs ...string) (int64, error) {
	var total int64
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			total += allocated(info)
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("disk usage of %s: %w", d, err)
		}
	}
	return total, nil
}

// jetStreamProc is JetStream as a process of its own (nats-server -js -sd
// store, on a free loopback port) and n client connections to it, each
// with a JetStream context: the anchor side of bench persist --streams and
// --keys.
type jetStreamProc struct {
	store  string
	server func() (*child, error) // starts the process again on store
	proc   *child
	jss    []jetstream.JetStream
	conns  []*nats.Conn
}

// startJetStreamProc starts nats-server (bin) with JetStream in dir and
// connects n clients named clientName-i; on failure nothing is left running.
func startJetStreamProc(bin, dir, clientName string, n int, opts ...jetstream.JetStreamOpt) (*jetStreamProc, error) {
	j := &jetStreamProc{store: filepath.Join(dir, "store")}
	if err := os.MkdirAll(j.store, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	j.server = func() (*child, error) {
		return startChild("nats-server -js", filepath.Join(dir, "nats-server.log"), bin, []string{"-js", "-sd", j.store, "-a", "127.0.0.1", "-p", strconv.Itoa(port)}, nil)
	}
	if j.proc, err = j.server(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			j.closeConns()
			_, _ = j.proc.stop(time.Minute)
		}
	}()
	if err := waitPort(j.proc, port, time.Minute); err != nil {
		return nil, err
	}
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	j.jss = make([]jetstream.JetStream, n)
	for i := range j.jss {
		nc, err := nats.Connect(url, clientOptions(clientName+"-"+strconv.Itoa(i))...)
		if err != nil {
			return nil, fmt.Errorf("connect to nats-server -js: %w", err)
		}
		j.conns = append(j.conns, nc)
		if j.jss[i], err = jetstream.New(nc, opts...); err != nil {
			return nil, err
		}
	}
	ok = true
	return j, nil
}

// closeConns closes the clients' connections (not the process).
func (j *jetStreamProc) closeConns() {
	for _, nc := range j.conns {
		nc.Close()
	}
}
