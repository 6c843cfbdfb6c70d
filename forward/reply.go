package forward

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Reply is what a peer answers to a batch. It is advisory, and bounded: a
// receiver writes the entries of NoSocket, then of NoWatch, in order, until
// the next one would take the reply past the 1 MiB a sender reads
// (maxReplyBytes), and leaves out the rest, so the reply to a batch it
// applied always reaches its sender whole. An entry left out costs only
// time: the sender keeps sending to that (user, app), or keeps that token,
// until a later reply names it.
type Reply struct {
	// NoSocket names the (user, app) pairs the receiver holds no
	// connection for, read off its own socket registry: the only signal
	// that authorises a repair.
	NoSocket []SocketRef `json:"noSocket,omitempty"`
	// NoWatch names anchor tokens the receiver holds no session row for,
	// so the sender prunes them from its remote-watch index.
	NoWatch []WatchRef `json:"noWatch,omitempty"`
}

// appendJSON appends r as JSON of at most limit bytes, keeping the longest
// prefix of its entries that fits (see [Reply]), and reports how many
// entries it left out. It writes what json.Marshal does, but without
// escaping <, > and & (six bytes each, which made a reply several times the
// size of its batch): a reply goes to a Go sender, never into HTML.
func (r Reply) appendJSON(b []byte, limit int) (_ []byte, omitted int) {
	start := len(b)
	b = append(b, '{')
	var entry []byte
	full := false
	list := func(key string, n int, enc func(b []byte, i int) []byte) {
		if full {
			omitted += n
			return
		}
		opened := false
		for i := range n {
			entry = entry[:0]
			if opened {
				entry = append(entry, ',')
			} else {
				if len(b)-start > 1 {
					entry = append(entry, ',')
				}
				entry = append(append(append(entry, '"'), key...), `":[`...)
			}
			entry = enc(entry, i)
			// The entry must leave room for the "]}" that close the reply.
			if len(b)-start+len(entry)+2 > limit {
				full, omitted = true, omitted+n-i
				break
			}
			b, opened = append(b, entry...), true
		}
		if opened {
			b = append(b, ']')
		}
	}
	list("noSocket", len(r.NoSocket), func(b []byte, i int) []byte { return r.NoSocket[i].appendJSON(b) })
	list("noWatch", len(r.NoWatch), func(b []byte, i int) []byte { return r.NoWatch[i].appendJSON(b) })
	return append(b, '}'), omitted
}

// SocketRef is one (user, app) pair; an empty AppUID travels as null.
type SocketRef struct {
	UserID int64
	AppUID string
}

type wireSocketRef struct {
	UserID int64   `json:"userId"`
	AppUID *string `json:"appUid"`
}

// MarshalJSON writes {"userId":..,"appUid":..|null}.
func (r SocketRef) MarshalJSON() ([]byte, error) {
	return r.appendJSON(nil), nil
}

func (r SocketRef) appendJSON(b []byte) []byte {
	b = strconv.AppendInt(append(b, `{"userId":`...), r.UserID, 10)
	b = append(b, `,"appUid":`...)
	if r.AppUID == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, r.AppUID)
	}
	return append(b, '}')
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *SocketRef) UnmarshalJSON(b []byte) error {
	var w wireSocketRef
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("socket ref: %w", err)
	}
	r.UserID, r.AppUID = w.UserID, ""
	if w.AppUID != nil {
		r.AppUID = *w.AppUID
	}
	return nil
}

// WatchRef is one anchor token in one user's keyspace.
type WatchRef struct {
	UserID int64  `json:"userId"`
	Token  string `json:"token"`
}

func (w WatchRef) appendJSON(b []byte) []byte {
	b = strconv.AppendInt(append(b, `{"userId":`...), w.UserID, 10)
	b = appendString(append(b, `,"token":`...), w.Token)
	return append(b, '}')
}
