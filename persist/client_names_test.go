package persist_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testdisk"
	"github.com/switchyard-dev/switchyard/persist"
)

// The client refuses names and keys that the header encoding would rewrite
// (a\nb would arrive as "a b", " sp " as "sp") before sending anything: no
// request reaches the server, so no other stream or key is written.
func TestClientRefusesAliasingNames(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wantBad := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, persist.ErrBadRequest) {
			t.Errorf("%s: %v, want bad-request", what, err)
		}
	}
	for _, name := range []string{"a\nb", " sp ", "sp\t", "a\x00b", "\xff"} {
		s := h.stream(name)
		_, err := s.Set(ctx, []byte("v"), persist.SetOptions{})
		wantBad(fmt.Sprintf("set on %q", name), err)
		_, err = s.SetMany(ctx, []persist.Entry{{Value: []byte("v")}})
		wantBad(fmt.Sprintf("setMany on %q", name), err)
		_, err = s.Get(ctx, 1)
		wantBad(fmt.Sprintf("get on %q", name), err)
		_, _, err = s.GetAll(ctx, persist.Range{})
		wantBad(fmt.Sprintf("getAll on %q", name), err)
		_, err = s.Keys(ctx)
		wantBad(fmt.Sprintf("keys on %q", name), err)
		_, err = s.Inventory(ctx)
		wantBad(fmt.Sprintf("inventory on %q", name), err)
		_, err = s.UpdateConfig(ctx, persist.ConfigUpdate{MaxMsgs: ptr(int64(3))})
		wantBad(fmt.Sprintf("config on %q", name), err)
		_, err = s.Delete(ctx, persist.Delete{All: true})
		wantBad(fmt.Sprintf("delete on %q", name), err)
		w, err := s.Watch(ctx, persist.WatchOptions{}, func(persist.Event) {})
		if err != nil {
			wantBad(fmt.Sprintf("watch on %q", name), err)
		} else {
			<-w.Done()
			wantBad(fmt.Sprintf("watch on %q", name), w.Err())
		}
	}
	s := h.stream("keys")
	kv := h.client.KV(h.scope, "keys")
	for _, key := range []string{"k\n", " k", "k ", "k\r\nv", "\x7f", "k\xff"} {
		_, err := s.Set(ctx, []byte("v"), persist.SetOptions{Key: key})
		wantBad(fmt.Sprintf("set of key %q", key), err)
		_, err = s.SetMany(ctx, []persist.Entry{{Key: "fine", Value: []byte("v")}, {Key: key, Value: []byte("v")}})
		wantBad(fmt.Sprintf("setMany of key %q", key), err)
		_, err = s.GetKey(ctx, key)
		wantBad(fmt.Sprintf("get of key %q", key), err)
		_, err = kv.Set(ctx, key, []byte("v"), persist.SetOptions{})
		wantBad(fmt.Sprintf("kv set of key %q", key), err)
		_, err = kv.Delete(ctx, key)
		wantBad(fmt.Sprintf("kv delete of key %q", key), err)
	}
	_, err := h.client.LocalStream(ctx, h.scope, "a\nb", persist.LocalStreamOptions{})
	wantBad(`local stream "a\nb"`, err)
	if files := testdisk.Files(t, h.Dir); len(files) != 0 {
		t.Fatalf("refused requests reached the server: %v", files)
	}
	l, err := h.client.LocalStream(ctx, h.scope, "local", persist.LocalStreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Publish([]byte("v"), persist.LocalPublishOptions{Key: " k "})
	wantBad(`local publish of key " k "`, err)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// What the refused names would have become are names of their own.
	h.set("a b", "spaced", nil)
	if _, err := h.stream("a\nb").Get(ctx, 1); !errors.Is(err, persist.ErrBadRequest) {
		t.Fatalf(`get on "a\nb" next to "a b": %v`, err)
	}
	if _, err := s.Set(ctx, []byte("v"), persist.SetOptions{Key: "sp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetKey(ctx, " sp "); !errors.Is(err, persist.ErrBadRequest) {
		t.Fatalf(`get of key " sp " next to "sp": %v`, err)
	}
}
