package forward

import (
	"bytes"
	"strconv"

	"github.com/switchyard-dev/switchyard/internal/jsonstr"
)

// The queue encodes every item exactly once, at push, by appending to a
// byte slice: no reflection, no intermediate values, and the caller's
// pre-encoded JSON (event payloads, kv values) is never copied or re-scanned.

// appendString appends s as a JSON string (see jsonstr.Append: invalid
// UTF-8 as U+FFFD, so every body we send decodes).
func appendString(b []byte, s string) []byte { return jsonstr.Append(b, s, false) }

// appendKey appends `"key":` preceded by a comma unless it opens the object.
// Keys are our own constants and need no escaping.
func appendKey(b []byte, key string) []byte {
	if n := len(b); n > 0 && b[n-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendInt(b []byte, key string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, key), v, 10)
}

func appendStr(b []byte, key, v string) []byte {
	return appendString(appendKey(b, key), v)
}

func appendBool(b []byte, key string, v bool) []byte {
	return strconv.AppendBool(appendKey(b, key), v)
}

// The scanner below reads the top level of a JSON object without decoding
// it. The queue uses it to recognise gap markers (event.op == "gap") and the
// gap policy to lift id, subject and ts out of an event; both stop at the
// first match, and skipping a long string is an IndexByte, so a 64 KiB
// payload costs next to nothing.

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string that opens at b[i].
func skipString(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		// The quote is escaped if an odd number of backslashes precede it.
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, true
		}
		j++
	}
}

// skipValue returns the index just past the value that starts at b[i]. It
// checks brackets balance and strings close, not full JSON grammar: it is a
// reader of our own encodings that must never run past the input.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				if j == i {
					return 0, false
				}
				return j, true
			}
			j++
		}
		if j == i {
			return 0, false
		}
		return j, true
	}
}

// scanObject calls fn with the raw key (between its quotes, not unescaped)
// and raw value of each top-level member of the object b, in order, until fn
// returns false. It reports whether b read as an object up to that point.
func scanObject(b []byte, fn func(key, val []byte) bool) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		end, ok := skipString(b, i)
		if !ok {
			return false
		}
		key := b[i+1 : end-1]
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		vend, ok := skipValue(b, i)
		if !ok {
			return false
		}
		if !fn(key, b[i:vend]) {
			return true
		}
		i = skipWS(b, vend)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
}

// topLevel returns the raw value of the first member named key, or nil.
func topLevel(obj []byte, key string) []byte {
	var out []byte
	scanObject(obj, func(k, v []byte) bool {
		if string(k) == key {
			out = v
			return false
		}
		return true
	})
	return out
}
