package server

import (
	"math"
	"strconv"
	"strings"
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

// (Was: a Sy-Ttl over 2^62 was refused with "must be a positive number of
// milliseconds", which a positive number cannot fix: the message hid the upper
// bound.)
func TestSetTTLRefusalNamesTheBound(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.config("s", `{"allow_msg_ttl":true}`)
	for _, ttl := range []string{"0", strconv.FormatUint(persist.MaxTTL+1, 10), strconv.FormatUint(math.MaxUint64, 10)} {
		r := h.req(persist.CmdSet, "s", map[string]string{persist.HdrTTL: ttl}, []byte("v"))
		wantCode(t, r, persist.CodeBadRequest)
		if msg := string(r.Data); !strings.Contains(msg, ttl) || !strings.Contains(msg, strconv.FormatUint(persist.MaxTTL, 10)) {
			t.Fatalf("Sy-Ttl %s refused with %q: want the value and the bound %d in it", ttl, msg, uint64(persist.MaxTTL))
		}
	}
	h.set("s", "v", map[string]string{persist.HdrTTL: strconv.FormatUint(persist.MaxTTL, 10)})
}
