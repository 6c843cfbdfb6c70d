package store

import (
	"sync"

	"github.com/klauspost/compress/zstd"
)

// compressMin is the value size above which values are stored zstd-compressed
// (when that makes them smaller), unless the writer says with a
// Content-Encoding header that the value is compressed already.
const compressMin = 1024

// Value encodings in the enc column.
const (
	encRaw  = 0
	encZstd = 1
)

var (
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder
	zstdOnce sync.Once
	zstdErr  error
)

// codecs returns the shared zstd encoder and decoder; EncodeAll and DecodeAll
// are safe for concurrent use.
func codecs() (*zstd.Encoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		zenc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if zstdErr != nil {
			return
		}
		zdec, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
	})
	return zenc, zdec, zstdErr
}
