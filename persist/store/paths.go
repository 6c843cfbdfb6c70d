package store

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/persist"
)

// How a (scope, stream name) pair becomes a file under the data directory:
//
//	{dataDir}/{scope}/{readable}~{hash}.db
//
// scope is a valid scope token (lower-case letters, digits, '-' and '_'), so
// it is already a safe directory name. readable is at most readableMax bytes
// of the name with every byte outside [a-z0-9_-] replaced by '_' (upper-case
// letters are lowered): it only helps a human find a file and is not unique.
// hash is the first 32 hex digits (128 bits) of SHA-256 over the exact name
// bytes, which is what makes the file unique; the '~' separator never occurs
// in readable, so no name's file can be mistaken for another's. Names that
// differ only in case differ in hash, so a case-insensitive filesystem keeps
// them apart too. The full name is also stored inside the file and checked on
// open, so even a hash collision is detected rather than mixing two streams.
const (
	readableMax = 40
	hashHexLen  = 32
	fileSuffix  = ".db"
)

// streamFileName is the file name (no directory) of stream name.
func streamFileName(name string) string {
	var b strings.Builder
	b.Grow(readableMax + 1 + hashHexLen + len(fileSuffix))
	for i := 0; i < len(name) && i < readableMax; i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + ('a' - 'A'))
		default:
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(name))
	b.WriteByte('~')
	b.WriteString(hex.EncodeToString(sum[:])[:hashHexLen])
	b.WriteString(fileSuffix)
	return b.String()
}

// StreamPath maps (scope, name) to its file under dataDir. It fails with
// bad-request for an invalid scope or name, and (defensively, since the
// mapping cannot produce one) for any path that would leave dataDir.
func StreamPath(dataDir, scope, name string) (string, error) {
	if !bus.ValidScope(scope) {
		return "", persist.Errorf(persist.CodeBadRequest, "invalid scope %q", scope)
	}
	if err := persist.ValidStreamName(name); err != nil {
		return "", err
	}
	p := filepath.Join(dataDir, scope, streamFileName(name))
	rel, err := filepath.Rel(dataDir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", persist.Errorf(persist.CodeBadRequest, "stream name maps outside the data directory")
	}
	return p, nil
}
