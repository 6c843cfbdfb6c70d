package server

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// A config request names its fields exactly: {"MAX_MSGS":5} is bad-request
// naming the field, and changes nothing (encoding/json alone applied it).
func TestConfigFieldNamesExact(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.config("s", `{"max_msgs":10}`)
	for _, field := range []string{"MAX_MSGS", "Max_Msgs", "max_Msgs"} {
		r := h.req(persist.CmdConfig, "s", nil, []byte(`{"`+field+`":5}`))
		wantCode(t, r, persist.CodeBadRequest)
		if !strings.Contains(string(r.Data), strconv.Quote(field)) {
			t.Errorf("%s: answer %q does not name the field", field, r.Data)
		}
	}
	if c := h.config("s", ""); c.MaxMsgs != 10 {
		t.Fatalf("max_msgs %d after refused requests, want 10", c.MaxMsgs)
	}
}

// desc is bounded before anything is stored: an 8 MiB desc was committed
// and then answered too-large, and every config read failed until it was
// reset. Now the set is too-large and the old desc stays, readable.
// The NATS server's max payload is 1 MiB, not the embedded 8 MiB: the
// desc that fills it is as much too large for the answer, and a body of
// 8 MiB took up to 8.5 s of the harness's 10 s per request under -race on
// a loaded 2-core machine (6 of 30 runs timed out).
func TestConfigDescBounded(t *testing.T) {
	t.Parallel()
	h := newHarnessOn(t, testnats.Options{MaxPayload: 1 << 20}, nil, nil)
	h.config("s", `{"desc":"old"}`)
	for _, n := range []int{persist.MaxDescBytes + 1, int(h.nc.MaxPayload()) - 4096} {
		r := h.req(persist.CmdConfig, "s", nil, []byte(`{"max_msgs":3,"desc":"`+strings.Repeat("d", n)+`"}`))
		wantCode(t, r, persist.CodeTooLarge)
		c := h.config("s", "")
		if c.Desc != "old" || c.MaxMsgs != -1 {
			t.Fatalf("after a %d-byte desc: config %+v, want the old one", n, c)
		}
		if inv := h.inventory("s"); inv.Limits == nil || inv.Limits.Desc != "old" {
			t.Fatalf("after a %d-byte desc: inventory limits %+v", n, inv.Limits)
		}
	}
	long := strings.Repeat("ü", persist.MaxDescBytes/2)
	if c := h.config("s", `{"desc":"`+long+`"}`); c.Desc != long {
		t.Fatalf("a desc of exactly %d bytes: %q", persist.MaxDescBytes, c.Desc)
	}
	// And after a restart, read from the file.
	h.restart()
	if c := h.config("s", ""); c.Desc != long {
		t.Fatalf("after a restart: desc %q", c.Desc)
	}
}

// TestRefusedConfigCreatesNoStream: wire.md says a config body with unknown
// fields, wrong types or invalid values is bad-request and "either way
// nothing changes". On a stream that does not exist, the refused patch must
// not bring the stream into being (a file in the data directory, counted in
// Stats.Streams, which only a drop removes again). (Was: a config with a
// body opened its stream with create set and was checked only after, so a
// refused one left a new, empty stream; now the patch is checked on
// arrival, before any storage work.)
func TestRefusedConfigCreatesNoStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	testwait.For(t, "the walk's count", func() bool { return h.srv.Stats().Streams >= 0 })
	before := h.srv.Stats().Streams
	for i, body := range []string{`{"max_msgs":"x"}`, `{"MAX_MSGS":5}`, `{"nope":1}`, `{"discard_policy":"sometimes"}`} {
		stream := "refused-" + string(rune('a'+i))
		r := h.req(persist.CmdConfig, stream, nil, []byte(body))
		wantCode(t, r, persist.CodeBadRequest)
		p, err := store.StreamPath(h.dir, h.scope, stream)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); err == nil {
			t.Errorf("config %s was refused bad-request, yet it created the stream's file", body)
		}
	}
	if got := h.srv.Stats().Streams; got != before {
		t.Fatalf("Stats.Streams went from %d to %d after refused config requests", before, got)
	}
}

// (Was: a config body of JSON null, which encoding/json decodes into a
// struct without a word, was taken for an empty change: it created the
// stream and answered the defaults, where wire.md asks for a JSON object.)
func TestConfigBodyMustBeAnObject(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, body := range []string{"null", " null\n", `"x"`, "[]", "true"} {
		wantCode(t, h.req(persist.CmdConfig, "s", nil, []byte(body)), persist.CodeBadRequest)
	}
	if files := streamFiles(t, h.dir); len(files) != 0 {
		t.Fatalf("refused config bodies created %v", files)
	}
	// An empty object is a change of nothing, which creates the stream.
	if c := h.config("s", " {} "); c != persist.DefaultConfig() {
		t.Fatalf("config {}: %+v", c)
	}
}
