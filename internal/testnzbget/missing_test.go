package testnzbget

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpost"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// TestDownloadMissingArticle: an NZB naming an article the server does
// not have makes Download fail, with NZBGet's log in the error, instead of
// returning an incomplete download as a success.
func TestDownloadMissingArticle(t *testing.T) {
	t.Parallel()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := nntptest.Start(t)
	srv.AddGroup("alt.binaries.test", 0)
	c, err := nntp.Dial(ctx, nntp.Config{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	file := testpost.File{Name: "lonely.bin", Data: bytes.Repeat([]byte("switchyard"), 3000)}
	posted, err := testpost.PostFiles(ctx, c, "alt.binaries.test", poster, []testpost.File{file}, testpost.Options{PartSize: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	posted[0].Parts[1].MessageID = "<never-posted@switchyard.test>"
	var nzb bytes.Buffer
	if err := writeNZB(&nzb, "missing", posted); err != nil {
		t.Fatal(err)
	}
	nzbPath := filepath.Join(t.TempDir(), "missing.nzb")
	if err := os.WriteFile(nzbPath, nzb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := Download(ctx, t, nzbPath, serverFor(t, srv.Addr()))
	if err == nil {
		t.Fatalf("Download of an NZB with a missing article succeeded (into %s)", dir)
	}
	if !strings.Contains(err.Error(), "article downloads failed") || !strings.Contains(err.Error(), "nzbget log") {
		t.Fatalf("error without the log: %v", err)
	}
	t.Logf("Download failed as it should: %.2000s", err)
}
