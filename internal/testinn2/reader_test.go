package testinn2

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/nntp"
)

// TestReader: a client that never sends MODE READER can select a group
// on the reader port, where innd itself would answer 401 MODE-READER.
func TestReader(t *testing.T) {
	t.Parallel()
	addr := Reader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := nntp.Dial(ctx, nntp.Config{Addr: addr, SkipModeReader: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Group(ctx, DefaultGroups[0]); err != nil {
		t.Fatalf("GROUP %s on nnrpd: %v", DefaultGroups[0], err)
	}
}
