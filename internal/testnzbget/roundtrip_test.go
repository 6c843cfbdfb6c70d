package testnzbget

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpost"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

const poster = "Switchyard Poster <poster@switchyard.test>"

// TestRoundTripNNTPTest posts a release to nntptest and downloads it with
// NZBGet from an NZB built from what was posted.
func TestRoundTripNNTPTest(t *testing.T) {
	t.Parallel()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := nntptest.Start(t)
	srv.AddGroup("alt.binaries.test", 0)
	srv.AddGroup("alt.binaries.other", 0)
	roundTripVia(ctx, t, srv.Addr(), srv.Addr(), "alt.binaries.test", []string{"alt.binaries.other"}, nntp.Config{}, nil)
}

// TestRoundTripAuthTLS: NZBGet logs in (AUTHINFO) over TLS from the first
// byte, as it talks to commercial providers on port 563.
func TestRoundTripAuthTLS(t *testing.T) {
	t.Parallel()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serverTLS, pool, err := nntptest.SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	srv := nntptest.Start(t, nntptest.Config{TLS: serverTLS, ImplicitTLS: true, Users: map[string]string{"sy": "secret"}})
	srv.AddGroup("alt.binaries.test", 0)
	dial := nntp.Config{TLS: &tls.Config{RootCAs: pool}, ImplicitTLS: true, User: "sy", Pass: "secret"}
	roundTripVia(ctx, t, srv.Addr(), srv.Addr(), "alt.binaries.test", nil, dial, nil)
}

// roundTripVia posts a random release through postAddr, waits with
// await (when set) for the server to serve it, downloads it with NZBGet
// from readAddr and compares every file byte for byte.
func roundTripVia(ctx context.Context, t *testing.T, postAddr, readAddr, group string, crosspost []string, dial nntp.Config,
	await func(ctx context.Context, t *testing.T, readAddr string, posted []testpost.Posted)) {
	t.Helper()
	dial.Addr = postAddr
	c, err := nntp.Dial(ctx, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rel, err := testpost.RandomRelease(ctx, uint64(time.Now().UnixNano()), "Switchyard.Round.Trip.S01E01.720p-SY", testpost.Shape{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release: %d files, real par2: %v", len(rel.Files), rel.RealPar2)
	posted, err := testpost.PostFiles(ctx, c, group, poster, rel.Files, testpost.Options{
		Title: rel.Title, PartSize: 64 << 10, Crosspost: crosspost,
	})
	if err != nil {
		t.Fatal(err)
	}
	if await != nil {
		await(ctx, t, readAddr, posted)
	}
	nzbPath := filepath.Join(t.TempDir(), rel.Title+".nzb")
	f, err := os.Create(nzbPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeNZB(f, rel.Title, posted); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	server := serverFor(t, readAddr)
	server.User, server.Pass, server.TLS = dial.User, dial.Pass, dial.ImplicitTLS
	dir, err := Download(ctx, t, nzbPath, server)
	if err != nil {
		t.Fatal(err)
	}
	checkDownload(t, dir, rel.Files)
}

// checkDownload compares the download directory dir with the posted
// files: each byte for byte, and nothing else beside them.
func checkDownload(t *testing.T, dir string, files []testpost.File) {
	t.Helper()
	for _, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, want.Name))
		if err != nil {
			t.Errorf("downloaded %s: %v", want.Name, err)
			continue
		}
		if !bytes.Equal(got, want.Data) {
			t.Errorf("downloaded %s: %d bytes differ from the %d posted", want.Name, len(got), len(want.Data))
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(files) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("download directory holds %d entries %q, want the %d files", len(entries), names, len(files))
	}
}

// serverFor turns host:port into a Server.
func serverFor(t *testing.T, addr string) Server {
	t.Helper()
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatal(err)
	}
	return Server{Host: host, Port: port}
}
