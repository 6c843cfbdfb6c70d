package server

import (
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

func BenchmarkDecodeSetMany(b *testing.B) {
	var body []byte
	for range 1000 {
		var err error
		if body, err = persist.AppendFrame(body, &persist.Frame{Value: make([]byte, 128)}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := decodeSetMany(body); err != nil {
			b.Fatal(err)
		}
	}
}
