package store

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// encodeHeaders is the stored form of user headers: their JSON, or nothing
// when there are none (so a plain message costs no header bytes). A name or
// value that is not valid UTF-8 is refused: encoding/json would store it
// with U+FFFD in place of its bad bytes, a header other than the one sent.
func encodeHeaders(h map[string]string) ([]byte, error) {
	if len(h) == 0 {
		return nil, nil
	}
	for k, v := range h {
		if !utf8.ValidString(k) {
			return nil, fmt.Errorf("header name %q is not valid UTF-8", k)
		}
		if !utf8.ValidString(v) {
			return nil, fmt.Errorf("header %q: value %q is not valid UTF-8", k, v)
		}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	return b, nil
}

// decodeHeaders reverses encodeHeaders.
func decodeHeaders(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("decode headers: %w", err)
	}
	return h, nil
}

// messageSize is what a message counts against max_msg_size, max_bytes and
// max_bytes_per_second: its stored headers JSON, value and key.
func messageSize(headersJSON []byte, value []byte, key string) int64 {
	return int64(len(headersJSON) + len(value) + len(key))
}
