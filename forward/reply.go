package forward

import (
	"encoding/json"
	"fmt"
)

// Reply is what a peer answers to a batch.
type Reply struct {
	// NoSocket names the (user, app) pairs the receiver holds no
	// connection for, read off its own socket registry: the only signal
	// that authorises a repair.
	NoSocket []SocketRef `json:"noSocket,omitempty"`
	// NoWatch names anchor tokens the receiver holds no session row for,
	// so the sender prunes them from its remote-watch index.
	NoWatch []WatchRef `json:"noWatch,omitempty"`
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
	w := wireSocketRef{UserID: r.UserID}
	if r.AppUID != "" {
		w.AppUID = &r.AppUID
	}
	return json.Marshal(w)
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
