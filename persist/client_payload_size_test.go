package persist

import (
	"bytes"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testnats"
)

// requestSize counts exactly what nats.go counts against the max payload:
// a message of that size is sent, one byte more is nats.ErrMaxPayload. The
// headers include values nats.go trims, so the count must trim as it does.
func TestRequestSizeIsWhatNATSCounts(t *testing.T) {
	t.Parallel()
	const limit = 4096
	nc := testnats.Conn(t, testnats.Server(t, testnats.Options{MaxPayload: limit}))
	if got := nc.MaxPayload(); got != limit {
		t.Fatalf("max payload %d, want %d", got, limit)
	}
	for _, hdr := range []nats.Header{nil, {HdrCmd: {CmdSet}, HdrStream: {"s"}, HdrKey: {"ünï"}, "User": {"  padded\t", "second"}}} {
		m := &nats.Msg{Subject: "size.test", Header: hdr}
		m.Data = bytes.Repeat([]byte("x"), limit-requestSize(m))
		if n := requestSize(m); n != limit {
			t.Fatalf("requestSize %d after padding, want %d", n, limit)
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatalf("headers %v: a request of exactly the max payload: %v", hdr, err)
		}
		m.Data = append(m.Data, 'x')
		if err := nc.PublishMsg(m); !errors.Is(err, nats.ErrMaxPayload) {
			t.Fatalf("headers %v: one byte over the max payload: %v, want nats.ErrMaxPayload", hdr, err)
		}
	}
}
