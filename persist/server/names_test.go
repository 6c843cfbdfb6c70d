package server

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testdisk"
	"github.com/switchyard-dev/switchyard/persist"
)

// The server refuses the names and keys that break the naming rule in the
// form they reach it. Through nats.go that is every rule but the one about
// CR, LF and the ends of a value, which nats.go rewrites before sending.
func TestServerRefusesNamesItSees(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, name := range []string{"a\tb", "a\x01b", "nul\x00", "a\x7fb", "a\u0085b", "a\xffb", "sp\u00a0", "\u2003sp"} {
		wantCode(t, h.req(persist.CmdSet, name, nil, []byte("v")), persist.CodeBadRequest)
		wantCode(t, h.req(persist.CmdInventory, name, nil, nil), persist.CodeBadRequest)
		wantCode(t, h.req(persist.CmdSet, "s", map[string]string{persist.HdrKey: name}, []byte("v")), persist.CodeBadRequest)
		wantCode(t, h.req(persist.CmdGet, "s", map[string]string{persist.HdrKey: name}, nil), persist.CodeBadRequest)
	}
	// setMany frames carry keys in JSON, exactly: every refused key is seen.
	for _, key := range []string{"a\nb", " sp ", "sp ", "\tsp", "k\r", "a\x00b"} {
		body, err := persist.AppendFrame(nil, &persist.Frame{Key: "fine"})
		if err != nil {
			t.Fatal(err)
		}
		if body, err = persist.AppendFrame(body, &persist.Frame{Key: key}); err != nil {
			t.Fatal(err)
		}
		r := h.req(persist.CmdSetMany, "s", nil, body)
		wantCode(t, r, persist.CodeBadRequest)
		if !strings.HasPrefix(string(r.Data), "message 1: ") {
			t.Fatalf("setMany with key %q: %q does not name the message", key, r.Data)
		}
	}
	if files := testdisk.Files(t, h.dir); len(files) != 0 {
		t.Fatalf("refused requests left %v", files)
	}
}

// What the server cannot see: nats.go sends "a\nb" as "a b" and " sp " as
// "sp", valid names the server must accept. Only the sending client can
// refuse the original (persist.Client does); this test pins the encoding
// that makes that so, and fails if nats.go ever stops rewriting.
func TestServerSeesHeaderRewrites(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.ok(persist.CmdSet, "a\nb", map[string]string{persist.HdrKey: " sp "}, []byte("v"))
	var keys []string
	mustJSON(t, h.ok(persist.CmdKeys, "a b", nil, nil).Data, &keys)
	if len(keys) != 1 || keys[0] != "sp" {
		t.Fatalf(`"a\nb" with key " sp " sent by nats.go stored keys %q in "a b"`, keys)
	}
}

// rawRequest sends one request with the header block written by hand, as a
// client other than nats.go may, and returns the reply.
func rawRequest(t *testing.T, h *harness, headers string) string {
	t.Helper()
	inbox := h.nc.NewRespInbox()
	sub, err := h.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(h.e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("raw connection: %q, %v", line, err)
	}
	hdr := "NATS/1.0\r\n" + headers + "\r\n"
	subject := bus.APISubject(bus.DefaultService, h.scope, "0")
	proto := `CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}` + "\r\n" +
		fmt.Sprintf("HPUB %s %s %d %d\r\n%s\r\nPING\r\n", subject, inbox, len(hdr), len(hdr), hdr)
	if _, err := conn.Write([]byte(proto)); err != nil {
		t.Fatal(err)
	}
	for { // PONG: the server has read the HPUB
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("raw connection: %v", err)
		}
		if strings.HasPrefix(line, "-ERR") {
			t.Fatalf("raw connection: %s", line)
		}
		if strings.HasPrefix(line, "PONG") {
			break
		}
	}
	r, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return r.Header.Get(persist.HdrError)
}

// A client that writes header values as they are (not nats.go) delivers
// trailing whitespace and inner CRs to the server, which refuses them.
// Leading spaces are dropped by the server's own header parser, and a LF
// ends the header line, so those never reach the rule.
func TestServerRefusesRawHeaderNames(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, tc := range []struct{ name, headers string }{
		{"stream with trailing space", "Sy-Cmd: set\r\nSy-Stream: sp \r\n"},
		{"stream with trailing tab", "Sy-Cmd: set\r\nSy-Stream: sp\t\r\n"},
		{"stream with inner CR", "Sy-Cmd: set\r\nSy-Stream: a\rb\r\n"},
		{"key with trailing space", "Sy-Cmd: set\r\nSy-Stream: s\r\nSy-Key: k \r\n"},
		{"get of a key with trailing space", "Sy-Cmd: get\r\nSy-Stream: s\r\nSy-Key: k \r\n"},
	} {
		if code := rawRequest(t, h, tc.headers); code != string(persist.CodeBadRequest) {
			t.Errorf("%s: answered %q, want bad-request", tc.name, code)
		}
	}
	if code := rawRequest(t, h, "Sy-Cmd: inventory\r\nSy-Stream: fine\r\n"); code != "" {
		t.Fatalf("a plain raw request failed: %s", code)
	}
	if files := testdisk.Files(t, h.dir); len(files) != 0 {
		t.Fatalf("refused requests left %v", files)
	}
}

// rawFrame is one setMany frame with its metadata written by hand, as a
// client other than persist's may write it: the bytes reach the server as
// they are, invalid UTF-8 and lone surrogate escapes included.
func rawFrame(meta, value string) []byte {
	b := binary.AppendUvarint(nil, uint64(len(meta)))
	b = append(b, meta...)
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}

// Names that are not valid UTF-8 are refused in every encoding that reaches
// the server, never converted: encoding/json would turn the raw bytes and
// the lone surrogates of setMany frames into U+FFFD, so that "alias\xff",
// "alias\xfe" and "alias\udcff" all landed on the key "alias\ufffd", each
// replacing the last. A real U+FFFD is a character like any other: its key
// is written, and none of the others reaches it.
func TestServerRefusesNamesNotUTF8(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	const fffdKey = "alias\ufffd"
	attacks := []struct {
		name string
		send func() *nats.Msg
	}{}
	for _, meta := range []string{
		"{\"key\":\"alias\xff\"}",
		"{\"key\":\"alias\xfe\"}",
		"{\"key\":\"alias\xed\xb3\xbf\"}", // U+DCFF in CESU-8: not UTF-8
		`{"key":"alias\udcff"}`,
		`{"key":"alias\ud800"}`,
		`{"key":"alias\ud800\u0041"}`,
		`{"key":"alias\uDCFF"}`,
		"{\"key\":\"k\",\"headers\":{\"h\":\"v\xff\"}}",
		`{"key":"k","headers":{"\udcff":"v"}}`,
		`{"key":"k","msgId":"id\udcff"}`,
	} {
		body := append(rawFrame(`{"key":"fine"}`, "v"), rawFrame(meta, "v")...)
		attacks = append(attacks, struct {
			name string
			send func() *nats.Msg
		}{"setMany frame " + strconv.Quote(meta), func() *nats.Msg { return h.req(persist.CmdSetMany, "s", nil, body) }})
	}
	for _, key := range []string{"alias\xff", "alias\xfe", "alias\xed\xb3\xbf", "alias\xef\xbf"} {
		attacks = append(attacks, struct {
			name string
			send func() *nats.Msg
		}{"set with key " + strconv.Quote(key), func() *nats.Msg {
			return h.req(persist.CmdSet, "s", map[string]string{persist.HdrKey: key}, []byte("v"))
		}}, struct {
			name string
			send func() *nats.Msg
		}{"set on stream " + strconv.Quote(key), func() *nats.Msg { return h.req(persist.CmdSet, key, nil, []byte("v")) }})
	}
	attacks = append(attacks, struct {
		name string
		send func() *nats.Msg
	}{"set with a header value not UTF-8", func() *nats.Msg {
		return h.req(persist.CmdSet, "s", map[string]string{persist.HdrKey: "k", "H": "v\xff"}, []byte("v"))
	}})
	refuse := func() {
		t.Helper()
		for _, a := range attacks {
			r := a.send()
			if got := persist.Code(r.Header.Get(persist.HdrError)); got != persist.CodeBadRequest {
				t.Errorf("%s: code %q (%s), want bad-request", a.name, got, r.Data)
			}
		}
	}
	refuse()
	if files := testdisk.Files(t, h.dir); len(files) != 0 {
		t.Fatalf("refused requests left %v", files)
	}
	// The real U+FFFD, in both encodings: one key.
	h.ok(persist.CmdSetMany, "s", nil, rawFrame(`{"key":"alias\ufffd"}`, "escaped"))
	want := h.set("s", "real", map[string]string{persist.HdrKey: fffdKey})
	refuse()
	r := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrKey: fffdKey}, nil)
	if string(r.Data) != "real" || r.Header.Get(persist.HdrSeq) != strconv.FormatUint(want.Seq, 10) {
		t.Fatalf("key %q holds %q at seq %s, want %q at %d", fffdKey, r.Data, r.Header.Get(persist.HdrSeq), "real", want.Seq)
	}
	var keys []string
	mustJSON(t, h.ok(persist.CmdKeys, "s", nil, nil).Data, &keys)
	if len(keys) != 1 || keys[0] != fffdKey {
		t.Fatalf("keys %q, want only %q", keys, fffdKey)
	}
	if inv := h.inventory("s"); inv.Count != 1 {
		t.Fatalf("%d messages, want 1: a refused request wrote", inv.Count)
	}
}

// TestSetRefusesUserHeadersAsSetManyDoes: wire.md says control characters
// other than CR and LF in headers reach the server intact "and [are]
// refused there whatever the client", and that a user header's value
// follows the naming rule (setMany refuses it with bad-request). A set from
// a client that does not check (the nats CLI, any other language) must be
// refused the same way, not stored: setMany refuses this very header.
// (Was: decodeSet only checked that a user header was valid UTF-8, while
// decodeSetMany applied persist.CheckHeader; set now applies it too.)
func TestSetRefusesUserHeadersAsSetManyDoes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	hdr := map[string]string{"X-A": "a\x01b"}

	var body []byte
	body, err := persist.AppendFrame(body, &persist.Frame{Headers: hdr})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, h.req(persist.CmdSetMany, "hv", nil, body), persist.CodeBadRequest)

	r := h.req(persist.CmdSet, "hv", hdr, []byte("v"))
	if code := r.Header.Get(persist.HdrError); code != string(persist.CodeBadRequest) {
		t.Fatalf("set with user header value %q answered %q (%s), want bad-request as setMany answers", hdr["X-A"], code, r.Data)
	}
}

// (Was: the server stored any msgID it was sent: control characters, bytes
// that are not UTF-8 and ids of any length, which the client refuses and
// the msgID window then held for two minutes.)
func TestServerRefusesBadMsgIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	long := strings.Repeat("i", persist.MaxMsgIDBytes+1)
	for _, tc := range []struct {
		id   string
		code persist.Code
	}{
		{"a\x01b", persist.CodeBadRequest},
		{"a\tb", persist.CodeBadRequest},
		{"id\xff", persist.CodeBadRequest},
		{long, persist.CodeTooLarge},
	} {
		wantCode(t, h.req(persist.CmdSet, "s", map[string]string{persist.HdrKey: "k", persist.HdrMsgID: tc.id}, []byte("v")), tc.code)
		wantCode(t, h.req(persist.CmdDelete, "s", map[string]string{persist.HdrAll: "true", persist.HdrMsgID: tc.id}, nil), tc.code)
		meta, err := json.Marshal(map[string]string{"key": "k", "msgId": tc.id})
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid([]byte(tc.id)) {
			meta = []byte(`{"key":"k","msgId":"` + tc.id + `"}`)
		}
		r := h.req(persist.CmdSetMany, "s", nil, append(rawFrame(`{"key":"fine"}`, "v"), rawFrame(string(meta), "v")...))
		wantCode(t, r, tc.code)
		// (Bytes that are not UTF-8 are refused by the frame decoder,
		// before the frames are counted.)
		if utf8.ValidString(tc.id) && !strings.HasPrefix(string(r.Data), "message 1: ") {
			t.Fatalf("setMany with msgId %.40q: %q does not name the message", tc.id, r.Data)
		}
	}
	if files := testdisk.Files(t, h.dir); len(files) != 0 {
		t.Fatalf("refused requests left %v", files)
	}
	// The longest id the bound allows is a msgID like any other.
	id := long[1:]
	first := h.ok(persist.CmdSet, "s", map[string]string{persist.HdrKey: "k", persist.HdrMsgID: id}, []byte("v"))
	again := h.ok(persist.CmdSet, "s", map[string]string{persist.HdrKey: "k", persist.HdrMsgID: id}, []byte("v"))
	if again.Header.Get(persist.HdrDup) != "true" || again.Header.Get(persist.HdrSeq) != first.Header.Get(persist.HdrSeq) {
		t.Fatalf("a retry with a %d-byte msgID was not answered as the first write: %v", len(id), again.Header)
	}
}
