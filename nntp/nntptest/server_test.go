package nntptest

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/usenet/rar"
	"github.com/switchyard-dev/switchyard/usenet/yenc"
)

// TestServerLifecycle: the server follows the lifecycle rules, and Stop
// closes its port.
func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	s := New(Config{})
	lifecycletest.Start(t, s)
	addr := s.Addr()
	lifecycletest.Stop(t, s)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the stopped server's port still accepts")
	}

	lifecycletest.Stop(t, New(Config{})) // before Start
}

// TestStartServes: the test helper's server is listening when it returns.
func TestStartServes(t *testing.T) {
	t.Parallel()
	s := Start(t)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 3)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "200" {
		t.Fatalf("greeting %q, %v; want 200", buf, err)
	}
}

// TestGeneratedVolumesAreRAR: the first part of every generated rar
// volume decodes to the headers of a RAR volume of the set (the first one
// says so), naming one inner file after the release, encrypted in a share
// of releases; the overview's byte and line counts still match the
// article, whose data lines then hold yEnc escapes.
// (Was: every generated body was random data, so post-processing read no
// RAR headers in a .part01.rar and recorded each demo release failed.)
func TestGeneratedVolumesAreRAR(t *testing.T) {
	t.Parallel()
	const group, releases = "alt.binaries.demo.1", 30
	s := Start(t, Config{PartSize: 2000})
	s.AddGroup(group, releases*partsPerFile*filesPerRelease)
	ctx := context.Background()
	c, err := nntp.Dial(ctx, nntp.Config{Addr: s.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Group(ctx, group); err != nil {
		t.Fatal(err)
	}
	var firsts []nntp.Overview
	if err := c.Over(ctx, 1, releases*partsPerFile*filesPerRelease, func(ov nntp.Overview) error {
		if (ov.Number-1)%partsPerFile == 0 {
			firsts = append(firsts, ov)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(firsts) != releases*filesPerRelease {
		t.Fatalf("%d first parts, want %d", len(firsts), releases*filesPerRelease)
	}
	escaped, encrypted := 0, 0
	for i, ov := range firsts {
		var art bytes.Buffer
		if _, err := c.Article(ctx, ov.MessageID, &art); err != nil {
			t.Fatal(err)
		}
		if int64(art.Len()) != ov.Bytes {
			t.Fatalf("article %d has %d bytes, overview says %d", ov.Number, art.Len(), ov.Bytes)
		}
		_, body, _ := bytes.Cut(art.Bytes(), []byte("\r\n\r\n"))
		if lines := int64(bytes.Count(body, []byte("\r\n"))); lines != ov.Lines {
			t.Fatalf("article %d has %d body lines, overview says %d", ov.Number, lines, ov.Lines)
		}
		if bytes.Contains(bytes.SplitN(body, []byte("\r\n"), 4)[2], []byte("=")) {
			escaped++
		}
		d, err := yenc.Decode(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("article %d: %v", ov.Number, err)
		}
		info, err := rar.Inspect(d.Data)
		if err != nil {
			t.Fatalf("article %d (%s): %v", ov.Number, d.Name, err)
		}
		release, _, _ := strings.Cut(ov.Subject, " - ")
		file := i%filesPerRelease + 1
		if info.Version != 4 || !info.Volume || info.FirstVolume != (file == 1) || len(info.Names) != 1 ||
			!strings.HasPrefix(info.Names[0], release+".") {
			t.Fatalf("volume %d of %s: %+v", file, release, info)
		}
		if info.EncryptedFiles {
			encrypted++
		}
	}
	if escaped == 0 {
		t.Error("no first data line held an escape: the escapes' bytes are not tested")
	}
	if encrypted == 0 || encrypted == len(firsts) {
		t.Errorf("%d of %d volumes encrypted: want a share of them", encrypted, len(firsts))
	}
}
