package persist

import (
	"context"
	"errors"
	"fmt"
)

// KV is a key-value view of a stream: every write is keyed, so the stream
// holds the current value of each key (older rows of a key are replaced).
type KV struct {
	s *Stream
}

// KV returns a key-value handle on the stream name in scope.
func (c *Client) KV(scope, name string, opts ...StreamOption) *KV {
	return &KV{s: c.Stream(scope, name, opts...)}
}

// Stream is the stream under this KV.
func (kv *KV) Stream() *Stream { return kv.s }

// Set stores value under key. opts.Key is ignored; use opts.PrevSeq for a
// compare-and-set against the seq Get returned.
func (kv *KV) Set(ctx context.Context, key string, value []byte, opts SetOptions) (SetResult, error) {
	if key == "" {
		return SetResult{}, Errorf(CodeBadRequest, "empty key")
	}
	opts.Key = key
	return kv.s.Set(ctx, value, opts)
}

// Get returns the current message of key (its Seq is the CAS token), or an
// error matching ErrNotFound.
func (kv *KV) Get(ctx context.Context, key string) (*Message, error) {
	if key == "" {
		return nil, Errorf(CodeBadRequest, "empty key")
	}
	return kv.s.GetKey(ctx, key)
}

// Delete removes key. It reports whether the key existed: true when this
// call removed the key's current row, false when it found no row. A write of
// the key racing the delete either lands after it (and survives) or is
// removed by it. The row to remove is found with a get; when another write
// replaced or removed that row before the delete reached it, Delete looks
// again, so the answer is about the key and not about one of its rows. It
// keeps looking while other writers keep changing the key, until ctx ends.
func (kv *KV) Delete(ctx context.Context, key string) (bool, error) {
	for {
		m, err := kv.Get(ctx, key)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("delete key %q: %w", key, err)
		}
		seqs, err := kv.s.Delete(ctx, Delete{Seqs: []uint64{m.Seq}})
		if err != nil {
			return false, fmt.Errorf("delete key %q: %w", key, err)
		}
		if len(seqs) == 1 {
			return true, nil
		}
	}
}

// Keys lists every key.
func (kv *KV) Keys(ctx context.Context) ([]string, error) { return kv.s.Keys(ctx) }
