package persist

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/switchyard-dev/switchyard/internal/jsonstr"
)

// decodeFeedBody decodes the frames of a feed message body into one slice,
// so a message costs one allocation for its frames rather than one each. A
// feed watcher hub decodes each message once for all its watchers, who then
// share the result read-only. On an error the frames before it are
// returned with it. Values alias b.
func decodeFeedBody(b []byte) ([]Frame, error) {
	var out []Frame
	for len(b) > 0 {
		meta, value, rest, err := nextFrame(b)
		if err != nil {
			return out, err
		}
		b = rest
		if out == nil {
			// Most feed messages are one commit of one or two frames (a
			// keyed set and the delete of the row it replaced).
			out = make([]Frame, 0, 2)
		}
		out = append(out, Frame{})
		m := &out[len(out)-1]
		if !parseMetaFast(meta, m) {
			*m = Frame{}
			if err := jsonstr.CheckText(meta); err != nil {
				return out[:len(out)-1], Errorf(CodeBadRequest, "malformed frame metadata: %v", err)
			}
			if err := json.Unmarshal(meta, m); err != nil {
				return out[:len(out)-1], Errorf(CodeBadRequest, "malformed frame metadata: %v", err)
			}
		}
		m.Value = value
	}
	return out, nil
}

// parseMetaFast decodes frame metadata in the form the encoders write
// (appendMetaFast's, and encoding/json's for delete frames:
// {"op":"delete","seqs":[1,2]}) without reflection. It gives up (ok false,
// m partly written) on anything else — whitespace, escapes, non-ASCII,
// headers, null, names in another case, numbers encoding/json would read
// differently — and the caller then uses encoding/json, so the result is
// always what encoding/json would give (FuzzParseMetaFast checks).
func parseMetaFast(b []byte, m *Frame) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	b = b[1 : len(b)-1]
	for len(b) > 0 {
		if b[0] != '"' {
			return false
		}
		i := bytes.IndexByte(b[1:], '"')
		if i < 0 {
			return false
		}
		name := b[1 : 1+i]
		b = b[2+i:]
		if len(b) == 0 || b[0] != ':' {
			return false
		}
		b = b[1:]
		var ok bool
		switch string(name) {
		case "seq":
			m.Seq, b, ok = metaUint(b)
		case "time":
			m.Time, b, ok = metaInt(b)
		case "ttl":
			m.TTL, b, ok = metaInt(b)
		case "prevSeq":
			var v uint64
			if v, b, ok = metaUint(b); ok {
				m.PrevSeq = &v
			}
		case "key":
			m.Key, b, ok = metaString(b)
		case "msgId":
			m.MsgID, b, ok = metaString(b)
		case "op":
			m.Op, b, ok = metaString(b)
		case "seqs":
			m.Seqs, b, ok = metaUints(b)
		}
		if !ok {
			return false
		}
		if len(b) == 0 {
			break
		}
		if b[0] != ',' || len(b) == 1 {
			return false
		}
		b = b[1:]
	}
	return true
}

// metaUint reads a JSON unsigned integer: digits, no leading zero, no
// fraction or exponent (the caller rejects what follows if it is not ',',
// ']' or the end), no overflow.
func metaUint(b []byte) (uint64, []byte, bool) {
	if len(b) == 0 || b[0] < '0' || b[0] > '9' {
		return 0, b, false
	}
	if b[0] == '0' {
		return 0, b[1:], true
	}
	var v uint64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, b, false
		}
		v = v*10 + d
	}
	return v, b[i:], true
}

// metaInt reads a JSON integer that fits an int64.
func metaInt(b []byte) (int64, []byte, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, rest, ok := metaUint(b)
	if !ok {
		return 0, b, false
	}
	if neg {
		if u > 1<<63 {
			return 0, b, false
		}
		return -int64(u), rest, true
	}
	if u > math.MaxInt64 {
		return 0, b, false
	}
	return int64(u), rest, true
}

// metaString reads a JSON string of printable ASCII without escapes.
func metaString(b []byte) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", b, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return string(b[1:i]), b[i+1:], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return "", b, false
		}
	}
	return "", b, false
}

// metaUints reads a JSON array of unsigned integers.
func metaUints(b []byte) ([]uint64, []byte, bool) {
	if len(b) == 0 || b[0] != '[' {
		return nil, b, false
	}
	b = b[1:]
	out := []uint64{}
	if len(b) > 0 && b[0] == ']' {
		return out, b[1:], true
	}
	for {
		v, rest, ok := metaUint(b)
		if !ok || len(rest) == 0 {
			return nil, b, false
		}
		out = append(out, v)
		switch rest[0] {
		case ']':
			return out, rest[1:], true
		case ',':
			b = rest[1:]
		default:
			return nil, b, false
		}
	}
}
