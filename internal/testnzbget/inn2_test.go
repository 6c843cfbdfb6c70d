package testnzbget

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testinn2"
	"github.com/switchyard-dev/switchyard/internal/testpost"
	"github.com/switchyard-dev/switchyard/nntp"
)

// TestRoundTripINN2 posts a crossposted release to INN2 (innd, as posters
// do) and downloads it with NZBGet from INN's reader daemon.
func TestRoundTripINN2(t *testing.T) {
	t.Parallel()
	Require(t)
	postAddr := testinn2.Addr(t)
	readAddr := testinn2.Reader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	groups := testinn2.DefaultGroups
	roundTripVia(ctx, t, postAddr, readAddr, groups[0], groups[1:2], nntp.Config{}, awaitFiled)
}

// awaitFiled waits until the reader serves the last posted article: innd
// files an article shortly after accepting it, and gives no signal.
func awaitFiled(ctx context.Context, t *testing.T, readAddr string, posted []testpost.Posted) {
	t.Helper()
	last := posted[len(posted)-1]
	id := last.Parts[len(last.Parts)-1].MessageID
	c, err := nntp.Dial(ctx, nntp.Config{Addr: readAddr, SkipModeReader: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		_, err := c.Stat(ctx, id)
		if err == nil {
			return
		}
		var se *nntp.StatusError
		if !errors.As(err, &se) {
			t.Fatalf("STAT %s: %v", id, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s was not filed: %v", id, err)
		case <-poll.C:
		}
	}
}
