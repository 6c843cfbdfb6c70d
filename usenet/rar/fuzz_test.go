package rar

import (
	"testing"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/usenet/rar/rartest"
)

// FuzzInspect feeds Inspect arbitrary input: it must not panic, names
// must be valid UTF-8 and non-empty, and a prefix of an input must never
// read more names than the input (reading is in order and stops early).
func FuzzInspect(f *testing.F) {
	small := []rartest.File{{Name: "d", Dir: true}, {Name: "d/a.txt", Data: []byte("hi")}, {Name: "ü.rar", Data: []byte("x")}}
	for _, w := range writers {
		f.Add(w.write(small, rartest.Options{}))
		f.Add(w.write(small, rartest.Options{EncryptedFiles: true, Volume: true}))
		f.Add(w.write(small[:1], rartest.Options{EncryptedHeaders: true}))
	}
	f.Add(rar4File(lhdUnicode, append([]byte("__x.txt\x00"), 0x00, 0x5c, 0xc4, 0xd6, 0x03)))
	f.Fuzz(func(t *testing.T, in []byte) {
		info, err := Inspect(in)
		if err == nil && info.Version != 4 && info.Version != 5 {
			t.Fatalf("no error and version %d", info.Version)
		}
		for _, n := range info.Names {
			if n == "" || !utf8.ValidString(n) {
				t.Fatalf("name %q", n)
			}
		}
		if len(in) > 0 {
			short, _ := Inspect(in[:len(in)-1])
			if len(short.Names) > len(info.Names) && err == nil {
				t.Fatalf("a prefix read names %q, the whole input %q", short.Names, info.Names)
			}
		}
	})
}
