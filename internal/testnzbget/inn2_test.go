package testnzbget

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
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

// TestRepostsAfterTakedownINN2 posts the release and its two reposts to
// INN2, cancels every article of the first copy (ctlinnd cancel, as a
// takedown does) and downloads each repost's NZB byte for byte.
func TestRepostsAfterTakedownINN2(t *testing.T) {
	t.Parallel()
	Require(t)
	postAddr := testinn2.Addr(t)
	readAddr := testinn2.Reader(t)
	ctlinnd, err := exec.LookPath("ctlinnd")
	if err != nil {
		t.Skip("ctlinnd is not installed: the takedown cannot be made")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := nntp.Dial(ctx, nntp.Config{Addr: postAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A title of its own: the long-lived server holds other tests' posts.
	title := fmt.Sprintf("Takedown.Show.S01E%02d.720p.WEB-DL-SY%d", time.Now().Unix()%100, time.Now().UnixNano())
	rel, err := testpost.RandomRelease(ctx, uint64(time.Now().UnixNano()), title, testpost.Shape{Volumes: 2, VolumeSize: 48 << 10})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	group := testinn2.DefaultGroups[2]
	copies := postCopies(ctx, t, c, group, rel, now)
	for _, posted := range copies {
		awaitFiled(ctx, t, readAddr, posted)
	}
	apiURL, key := startIndexer(t, ctx, postAddr, group)
	items := checkReposts(ctx, t, apiURL, key, title, now)

	for _, p := range copies[0] {
		for _, part := range p.Parts {
			out, err := exec.CommandContext(ctx, ctlinnd, "cancel", part.MessageID).CombinedOutput()
			if err != nil {
				t.Skipf("ctlinnd cancel cannot work here (%v: %s): the takedown cannot be made", err, out)
			}
		}
	}
	gone := copies[0][0].Parts[0].MessageID
	r, err := nntp.Dial(ctx, nntp.Config{Addr: readAddr, SkipModeReader: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Stat(ctx, gone); err == nil {
		t.Fatalf("%s is still served after ctlinnd cancel", gone)
	}
	for _, it := range items[1:] {
		download(ctx, t, it, readAddr, rel)
	}
}
