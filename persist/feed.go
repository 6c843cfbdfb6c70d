package persist

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/switchyard-dev/switchyard/bus"
)

// The change feed: after each commit, the server that wrote a stream
// publishes the commit's changes on the stream's feed subject,
// "{service}.{scope}.feed.{streamKey}", in seq order (see docs/wire.md).
// The subject names the stream, not the server, so a write that reached the
// wrong server still reaches every watcher.
//
// A feed message's body is frames (AppendFrame): one per change. Its headers
// let a watcher notice loss without decoding anything:
//
//	Sy-Feed-Epoch  the publisher's epoch: random, new each time a server starts (and, suffixed, for a stream whose numbering it forgot)
//	Sy-Feed-N      1, 2, 3... per stream within an epoch; a missing number is a lost message
//	Sy-Server      the publishing server's id
//	Sy-Stream      the stream's name (the subject may carry a hash of it)
//	Sy-First-Seq   the lowest seq the message mentions
//	Sy-Last-Seq    the highest seq the message mentions
//	Sy-Ephemeral   "true" for an ephemeral stream

// Feed header names.
const (
	HdrFeedEpoch = "Sy-Feed-Epoch" // publisher epoch (feed messages)
	HdrFeedN     = "Sy-Feed-N"     // per-stream message counter within the epoch (feed messages)
	HdrServer    = "Sy-Server"     // publishing server id (feed messages)
	HdrFirstSeq  = "Sy-First-Seq"  // lowest seq in a feed message
	HdrLastSeq   = "Sy-Last-Seq"   // highest seq in a feed message
)

// Feed frame operations (Frame.Op).
const (
	FeedOpSet    = "set"    // Msg is a stored message, value included
	FeedOpDelete = "delete" // Seqs were removed
	FeedOpRef    = "ref"    // a stored message too large for the feed: fetch Seq with get or getAll
)

// FeedChunkBytes is the target body size of one feed message: a commit whose
// frames exceed it is split over several consecutive messages.
const FeedChunkBytes = 256 << 10

// streamKeyMax is the longest stream name used verbatim as a subject token.
const streamKeyMax = 64

// FeedSubject is the subject the changes of stream travel on:
// "{service}.{scope}.feed.{streamKey}". The key is the name itself when it
// is 1 to 64 of [A-Za-z0-9_-], else "~" and the first 32 hex digits of the
// SHA-256 of the name (a subject token can hold neither dots nor wildcards);
// ephemeral streams append "~e", so they never share a feed with the durable
// stream of the same name.
func FeedSubject(service, scope, stream string, ephemeral bool) string {
	if service == "" {
		service = bus.DefaultService
	}
	return bus.ScopeSubject(service, scope, "feed", streamKey(stream, ephemeral))
}

func streamKey(name string, ephemeral bool) string {
	key := name
	if !plainToken(name) {
		sum := sha256.Sum256([]byte(name))
		key = "~" + hex.EncodeToString(sum[:])[:32]
	}
	if ephemeral {
		key += "~e"
	}
	return key
}

func plainToken(s string) bool {
	if len(s) == 0 || len(s) > streamKeyMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
