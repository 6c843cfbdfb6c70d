// Package rar reads what an indexer needs from the headers at the start of
// a RAR archive's first volume: the format version, whether the headers or
// the files are encrypted, the inner file names, and the volume and solid
// flags. It reads RAR 1.5–4.x (signature "Rar!\x1a\x07\x00") and RAR 5.0
// ("Rar!\x1a\x07\x01\x00") archives from a prefix of a volume, such as its
// first article, and never decompresses or decrypts anything: data areas
// are skipped by their sizes, and reading stops where the input ends,
// where a data area runs past it, at the end-of-archive header, or where
// the headers are encrypted.
//
// Every header read must pass its CRC. Service and comment headers are
// skipped; directory entries are not listed.
package rar

import (
	"bytes"
	"errors"
	"strings"
)

// Info is what the headers of one volume say.
type Info struct {
	Version          int      // 4 or 5
	EncryptedHeaders bool     // archive headers are encrypted: no names can be read
	EncryptedFiles   bool     // at least one file header read says its data is encrypted
	Names            []string // inner file names in archive order, from the headers read (directories excluded)
	Volume           bool     // part of a multi-volume set
	FirstVolume      bool     // the first volume (RAR5: volume number absent/0; RAR4: MHD_FIRSTVOLUME or no volume flag)
	Solid            bool
	Truncated        bool // input ended inside a header
	// End says the end-of-archive header was read: Names lists every file
	// that starts in this volume. Without it (the input ended inside a
	// header or a data area, or the headers are encrypted) more names may
	// follow.
	End bool
}

var (
	// ErrNotRAR says that the input does not start with a RAR signature
	// (nor holds one after a self-extractor's code).
	ErrNotRAR = errors.New("rar: no RAR signature")
	// ErrCRC says that a header's CRC does not match: parsing stops there.
	ErrCRC = errors.New("rar: header CRC mismatch")
	// ErrFormat says that a header is malformed (a size or field that
	// cannot be, an unknown signature version).
	ErrFormat = errors.New("rar: malformed header")
)

var (
	sig4 = []byte("Rar!\x1a\x07\x00")
	sig5 = []byte("Rar!\x1a\x07\x01\x00")
	// sigPrefix is common to both; a sixth byte 0x07 followed by another
	// version byte is a format this package does not know.
	sigPrefix = []byte("Rar!\x1a\x07")
)

// maxSFX bounds how far into the input a signature is looked for: a
// self-extracting archive starts with the extractor's code (RAR's own
// limit for it is about 1 MiB).
const maxSFX = 1 << 20

// Inspect reads the headers in b, the first bytes of a volume. A
// truncated input is no error: Info holds what was read, with Truncated
// set when the input ended inside a header. Errors wrap ErrNotRAR, ErrCRC
// or ErrFormat; with ErrCRC and ErrFormat, Info holds what was read before
// the bad header.
func Inspect(b []byte) (Info, error) {
	i := bytes.Index(b[:min(len(b), maxSFX+len(sig5))], sigPrefix)
	if i < 0 {
		return Info{}, ErrNotRAR
	}
	b = b[i:]
	switch {
	case bytes.HasPrefix(b, sig5):
		return inspect5(b[len(sig5):])
	case bytes.HasPrefix(b, sig4):
		return inspect4(b[len(sig4):])
	case len(b) < len(sig5) && (bytes.HasPrefix(sig5, b) || bytes.HasPrefix(sig4, b)):
		return Info{}, ErrNotRAR // too short to tell
	default:
		return Info{}, ErrNotRAR
	}
}

// Password is the Newznab `password` attr for the archive: 0 none, 1
// passworded (encrypted headers or encrypted files), 2 potentially
// passworded (an inner archive name such as .rar/.7z/.zip among Names,
// since its content cannot be seen).
func (i Info) Password() int {
	if i.EncryptedHeaders || i.EncryptedFiles {
		return 1
	}
	for _, n := range i.Names {
		if IsArchiveName(n) {
			return 2
		}
	}
	return 0
}

// IsArchiveName says whether a file name is one of an archive (or a
// volume of one) whose content an indexer cannot see: .rar, .rNN, .7z,
// .zip, and their numbered volumes (.7z.001, .zip.001).
func IsArchiveName(name string) bool {
	n := strings.ToLower(name)
	if i := strings.LastIndexByte(n, '.'); i >= 0 && len(n)-i == 4 && allDigits(n[i+1:]) {
		n = n[:i] // a numbered volume: look at the name before it
	}
	i := strings.LastIndexByte(n, '.')
	if i < 0 {
		return false
	}
	switch ext := n[i+1:]; {
	case ext == "rar", ext == "7z", ext == "zip":
		return true
	case len(ext) == 3 && ext[0] == 'r' && allDigits(ext[1:]):
		return true
	}
	return false
}

func allDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
