package server

import (
	"math"
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

// A setMany ttl is bounded like Sy-Ttl: a huge one must not overflow the
// expiry time into the past and make the stored message vanish at once.
func TestSetManyHugeTTL(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.config("s", `{"allow_msg_ttl":true}`)
	body, err := persist.AppendFrame(nil, &persist.Frame{Value: []byte("v"), TTL: math.MaxInt64})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, h.req(persist.CmdSetMany, "s", nil, body), persist.CodeBadRequest)
}
