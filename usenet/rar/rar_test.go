package rar

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/switchyard-dev/switchyard/usenet/rar/rartest"
)

// release is a typical posted archive's content: a directory, a file in
// it, a name that is not ASCII (RAR4 writes it in its UTF-16 form), and an
// inner archive.
func release() []rartest.File {
	return []rartest.File{
		{Name: "Sample", Dir: true},
		{Name: "Sample/sample.mkv", Data: bytes.Repeat([]byte("sample "), 300)},
		{Name: "Movie.2024.1080p – naïve 日本 😀.mkv", Data: []byte("movie data")},
		{Name: "Subs.rar", Data: make([]byte, 5000)},
		{Name: "movie.nfo", Data: []byte("nfo\r\n")},
	}
}

var releaseNames = []string{"Sample/sample.mkv", "Movie.2024.1080p – naïve 日本 😀.mkv", "Subs.rar", "movie.nfo"}

type writer func([]rartest.File, rartest.Options) []byte

var writers = []struct {
	name    string
	version int
	write   writer
}{{"rar4", 4, rartest.RAR4}, {"rar5", 5, rartest.RAR5}}

func TestInspectWritten(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opt      rartest.Options
		want     Info
		password int
	}{
		{"plain", rartest.Options{}, Info{Names: releaseNames, FirstVolume: true, End: true}, 2},
		{"encrypted files", rartest.Options{EncryptedFiles: true}, Info{Names: releaseNames, EncryptedFiles: true, FirstVolume: true, End: true}, 1},
		{"encrypted headers", rartest.Options{EncryptedHeaders: true}, Info{EncryptedHeaders: true, FirstVolume: true}, 1},
		{"first volume", rartest.Options{Volume: true}, Info{Names: releaseNames, Volume: true, FirstVolume: true, End: true}, 2},
		{"second volume", rartest.Options{Volume: true, VolumeNumber: 1}, Info{Names: releaseNames, Volume: true, End: true}, 2},
		{"last volume", rartest.Options{Volume: true, VolumeNumber: 3, Last: true}, Info{Names: releaseNames, Volume: true, End: true}, 2},
		{"solid", rartest.Options{Solid: true}, Info{Names: releaseNames, Solid: true, FirstVolume: true, End: true}, 2},
	}
	for _, w := range writers {
		for _, tt := range tests {
			t.Run(w.name+"/"+tt.name, func(t *testing.T) {
				got, err := Inspect(w.write(release(), tt.opt))
				if err != nil {
					t.Fatal(err)
				}
				want := tt.want
				want.Version = w.version
				if w.version == 5 && tt.opt.EncryptedHeaders {
					// RAR5 encrypts the main header too: its flags are
					// unknown, and FirstVolume keeps its default.
					want.Volume, want.Solid = false, false
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("Inspect =\n %+v, want\n %+v", got, want)
				}
				if p := got.Password(); p != tt.password {
					t.Fatalf("Password() = %d, want %d", p, tt.password)
				}
			})
		}
	}
}

// TestInspectPrefixes cuts archives at every length: no error, the names
// read are a prefix of the archive's, Truncated says the input ended
// inside a header, and only the whole archive reaches End.
func TestInspectPrefixes(t *testing.T) {
	t.Parallel()
	for _, w := range writers {
		for _, opt := range []rartest.Options{{}, {EncryptedFiles: true}, {EncryptedHeaders: true}} {
			full := w.write(release(), opt)
			whole, err := Inspect(full)
			if err != nil {
				t.Fatal(err)
			}
			sawTruncated, sawDataCut := false, false
			for n := 0; n < len(full); n++ {
				got, err := Inspect(full[:n])
				if n < 8 && w.version == 5 || n < 7 {
					if !errors.Is(err, ErrNotRAR) {
						t.Fatalf("%s %+v cut at %d: %+v, %v; want ErrNotRAR", w.name, opt, n, got, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s %+v cut at %d: %v", w.name, opt, n, err)
				}
				if len(got.Names) > len(whole.Names) || !reflect.DeepEqual(got.Names, whole.Names[:len(got.Names)]) && len(got.Names) > 0 {
					t.Fatalf("%s cut at %d: names %q, not a prefix of %q", w.name, n, got.Names, whole.Names)
				}
				if got.End || got.Version != w.version {
					t.Fatalf("%s cut at %d: %+v", w.name, n, got)
				}
				if !got.Truncated && !got.EncryptedHeaders {
					sawDataCut = true
				}
				sawTruncated = sawTruncated || got.Truncated
			}
			if !sawTruncated || (!opt.EncryptedHeaders && !sawDataCut) {
				t.Errorf("%s %+v: cuts inside headers %v, inside data %v: both expected", w.name, opt, sawTruncated, sawDataCut)
			}
		}
	}
}

func TestInspectBadCRC(t *testing.T) {
	t.Parallel()
	for _, w := range writers {
		files := release()
		ar := w.write(files, rartest.Options{})
		// Change a byte of the third file's name (in its header).
		i := bytes.Index(ar, []byte("Subs.rar"))
		ar[i] = 'X'
		got, err := Inspect(ar)
		if !errors.Is(err, ErrCRC) {
			t.Fatalf("%s: %+v, %v; want ErrCRC", w.name, got, err)
		}
		if !reflect.DeepEqual(got.Names, releaseNames[:2]) {
			t.Fatalf("%s: names before the bad header %q, want %q", w.name, got.Names, releaseNames[:2])
		}
	}
}

func TestInspectNotRAR(t *testing.T) {
	t.Parallel()
	for _, in := range [][]byte{nil, []byte("Rar!"), []byte("PK\x03\x04 a zip"), []byte("Rar!\x1a\x07\x02\x00 a future version")} {
		if got, err := Inspect(in); !errors.Is(err, ErrNotRAR) {
			t.Errorf("Inspect(%q) = %+v, %v; want ErrNotRAR", in, got, err)
		}
	}
}

func TestInspectSFX(t *testing.T) {
	t.Parallel()
	ar := append([]byte("MZ\x90\x00 self-extractor code ..."), rartest.RAR5(release(), rartest.Options{})...)
	got, err := Inspect(ar)
	if err != nil || !reflect.DeepEqual(got.Names, releaseNames) {
		t.Fatalf("Inspect = %+v, %v", got, err)
	}
}

// rar4File builds a RAR4 archive with one file header whose flags and raw
// name field are given, to test name forms the writer does not make.
func rar4File(flags uint16, name []byte) []byte {
	h := []byte{0, 0, 0x74, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(h[3:5], 0x8000|flags)
	h = append(h, make([]byte, 19)...) // sizes 0, OS, CRC, time, versions
	h = binary.LittleEndian.AppendUint16(h, uint16(len(name)))
	h = append(h, 0x20, 0, 0, 0)
	if flags&lhdLarge != 0 {
		h = append(h, make([]byte, 8)...)
	}
	h = append(h, name...)
	binary.LittleEndian.PutUint16(h[5:7], uint16(len(h)))
	binary.LittleEndian.PutUint16(h[0:2], uint16(crc32.ChecksumIEEE(h[2:])))
	main := []byte{0, 0, 0x73, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(main[0:2], uint16(crc32.ChecksumIEEE(main[2:])))
	return append(append([]byte("Rar!\x1a\x07\x00"), main...), h...)
}

func TestRAR4Names(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		flags uint16
		raw   []byte
		want  string
	}{
		{"ascii with backslashes", 0, []byte(`dir\sub\file.txt`), "dir/sub/file.txt"},
		{"unicode flag, UTF-8 without zero", lhdUnicode, []byte("naïve.txt"), "naïve.txt"},
		{"8-bit name read as Latin-1", 0, []byte("caf\xe9.txt"), "café.txt"},
		{"large file header", lhdLarge, []byte("big.mkv"), "big.mkv"},
		// "ÄÖx.txt": ascii part "__x.txt"; high byte 0x00; flags
		// 01 01 11 (op 1 twice with high byte 0: Ä Ö; op 3 copies the
		// rest from the ascii name: length 5-2 = 3).
		{"compressed: high byte, copy run", lhdUnicode, append([]byte("__x.txt\x00"), 0x00, 0x5c, 0xc4, 0xd6, 0x03), "ÄÖx.txt"},
		// "ЖжЖЗИ": high byte 0x04; op 1 twice (0x16, 0x36), op 3 with a
		// correction: 3 units from the ascii part "ABC", each + 0xd5 (mod
		// 256) under the high byte.
		{"compressed: high byte 0x04, corrected run", lhdUnicode, append([]byte("__ABC\x00"), 0x04, 0x5c, 0x16, 0x36, 0x81, 0xd5), "ЖжЖЗИ"},
		{"compressed, cut short", lhdUnicode, append([]byte("ab\x00"), 0x00, 0xaa, 0x41), "ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Inspect(rar4File(tt.flags, tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Names) != 1 || got.Names[0] != tt.want {
				t.Fatalf("names %q, want [%q]", got.Names, tt.want)
			}
		})
	}
}

func TestIsArchiveName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"a.rar": true, "A.RAR": true, "a.part01.rar": true, "a.r00": true, "a.7z": true, "a.zip": true,
		"a.7z.001": true, "a.zip.002": true, "a.mkv": false, "a.nfo": false, "a.001": false, "rar": false,
		"a.mkv.001": false, "a.rev": false,
	} {
		if got := IsArchiveName(name); got != want {
			t.Errorf("IsArchiveName(%q) = %v, want %v", name, got, want)
		}
	}
}
