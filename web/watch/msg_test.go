package watch

import (
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

// TestEncodeMsgStartsWithSeq: a "msg" message begins with its type and
// then its seq, which `switchyard bench ws`'s clients read without a full
// JSON decode (bench.msgSeq). Reordering wireMsg's fields breaks them.
func TestEncodeMsgStartsWithSeq(t *testing.T) {
	b := encodeMsg(&persist.Message{Seq: 42, Key: "k", Time: 1, Value: []byte("v"), Headers: map[string]string{"a": "b"}})
	if want := `{"type":"msg","seq":42,`; !strings.HasPrefix(string(b), want) {
		t.Fatalf("encodeMsg = %s; want it to begin %s", b, want)
	}
}
