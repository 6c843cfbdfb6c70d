package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// stuckDeleteStorage hands out streams whose deletes fail with a disk error
// asking for a reopen.
type stuckDeleteStorage struct{ store.Storage }

type stuckDeleteStream struct{ store.Stream }

func (s stuckDeleteStorage) Open(scope, name string, now time.Time) (store.Stream, error) {
	st, err := s.Storage.Open(scope, name, now)
	if err != nil {
		return nil, err
	}
	return stuckDeleteStream{st}, nil
}

func (s stuckDeleteStorage) OpenExisting(scope, name string, now time.Time) (store.Stream, error) {
	st, err := s.Storage.OpenExisting(scope, name, now)
	if err != nil {
		return nil, err
	}
	return stuckDeleteStream{st}, nil
}

func (stuckDeleteStream) Delete(persist.Delete, time.Time) (store.DeleteResult, []store.Change, error) {
	return store.DeleteResult{}, nil, &store.DiskError{Reason: store.ReasonIO, Reopen: true, Err: errors.New("disk I/O error")}
}

// TestReadAfterReopenInBatchSeesWrite: in one batch a read finds the stream
// missing, a write creates it and is acknowledged, a disk error closes the
// stream, and a later read of the same batch must open it again rather than
// answer as for the missing stream the first read saw.
func TestReadAfterReopenInBatchSeesWrite(t *testing.T) {
	t.Parallel()
	g := newGate()
	h := newHarnessHook(t, func(c *Config) {
		c.Workers = 1
		c.Storage = stuckDeleteStorage{store.NewSQLite(store.SQLiteConfig{Dir: c.DataDir})}
	}, g.hook)
	t.Cleanup(g.open)
	p := h.pending()
	p.set(0, "other", "held")
	testwait.For(t, "the write on another stream to hold the only worker", g.held.Load)
	key := map[string]string{persist.HdrKey: "k"}
	p.publish(1, h.msg(persist.CmdGet, "s", key, nil))
	p.publish(2, h.msg(persist.CmdSet, "s", key, []byte("v")))
	p.publish(3, h.msg(persist.CmdDelete, "s", map[string]string{persist.HdrSeq: "9"}, nil))
	p.publish(4, h.msg(persist.CmdGet, "s", key, nil))
	testwait.For(t, "the requests to queue on one stream", func() bool { return h.queued("s") == 4 })
	g.open()
	got := map[int]string{}
	for range 5 {
		i, r := p.next()
		got[i] = fmt.Sprintf("%s %s", r.Header.Get(persist.HdrError), r.Data)
	}
	if !strings.HasPrefix(got[2], ` {"seq":1,`) {
		t.Fatalf("set: %q", got[2])
	}
	if got[4] != " v" {
		t.Fatalf("get after the acknowledged set answered %q, want the value v (all answers: %v)", got[4], got)
	}
}
