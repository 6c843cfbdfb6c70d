package usenet

import (
	"encoding/json"
	"fmt"

	"github.com/klauspost/compress/s2"

	"github.com/switchyard-dev/switchyard/persist"
)

// encodingS2 is the Content-Encoding of the binaries and collections
// records: JSON compressed with s2. Segment lists are repetitive (message-ids
// share their domain, sizes their digits), so they shrink several times, and
// s2 costs far less CPU than the store's own zstd, which it skips for values
// that carry an encoding. The releases stream stays plain JSON: browsers,
// `switchyard watch` and the search index read it as it is.
const encodingS2 = "s2"

// encodeRecord is v as a stored record: s2-compressed JSON and the header
// that says so.
func encodeRecord(v any) ([]byte, map[string]string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	return s2.Encode(nil, b), map[string]string{persist.HdrContentEncoding: encodingS2}, nil
}

// decodeRecord reads a stored record into v, compressed or (as older
// versions wrote it) plain.
func decodeRecord(m *persist.Message, v any) error {
	b := m.Value
	switch enc := m.Headers[persist.HdrContentEncoding]; enc {
	case "":
	case encodingS2:
		var err error
		if b, err = s2.Decode(nil, b); err != nil {
			return fmt.Errorf("s2: %w", err)
		}
	default:
		return fmt.Errorf("unknown content encoding %q", enc)
	}
	return json.Unmarshal(b, v)
}
