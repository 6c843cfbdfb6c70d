package forward

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Kind names an item's type on the wire (its "kind" field).
type Kind string

// The item kinds. A receiver ignores kinds it does not know, so a newer
// sender can add one without breaking older receivers.
const (
	KindDelivery Kind = "delivery"
	KindAck      Kind = "ack"
	KindWatch    Kind = "watch"
	KindEvent    Kind = "event"
	KindBump     Kind = "bump"
)

// Item is one thing forwarded to a peer: *[Delivery], *[Ack], *[Watch],
// *[Event] or *[Bump]. The set is closed; the queue keeps the pointer it was
// given, so an item must not be modified after it is pushed.
type Item interface {
	// Kind reports the item's wire kind.
	Kind() Kind
	// appendWire appends the item's JSON encoding with one pre-encoded
	// segment left out: raw belongs at offset cut of the output. That is how
	// a payload reaches the batch body without ever being copied at push.
	appendWire(b []byte) (out []byte, cut int, raw []byte)
}

// Delivery is one event handed to whichever region holds the socket for it.
type Delivery struct {
	// UserID is who the delivery is for.
	UserID int64 `json:"userId"`
	// AppUID is the app whose room it lands in; empty travels as null.
	AppUID string `json:"appUid"`
	// SubID is the subscription the event matched.
	SubID string `json:"subId"`
	// Event is the event, pre-encoded as a JSON object. It is carried as is
	// and must be valid JSON: sizing and batching never re-serialise it.
	Event json.RawMessage `json:"event"`
	// AckRequired is set on a `single` delivery: the far side asks the
	// client to settle it. Such a delivery gets no gap marker when shed,
	// since its lease retries it.
	AckRequired bool `json:"ackRequired,omitempty"`
	// AckID identifies the settle the client must send back.
	AckID string `json:"ackId,omitempty"`
	// Origin is the region holding the lease, where the ack has to end up.
	Origin string `json:"origin,omitempty"`
}

// Ack is a client's settle on its way back to the region owning the lease.
type Ack struct {
	UserID  int64  `json:"userId"`
	SubID   string `json:"subId"`
	EntryID string `json:"entryId"`
}

// Watch says the sending region now has (op "add") or no longer has (op
// "drop") session watchers on one anchor token, or (op "sync", our
// extension, no token) that it has just started and holds no
// announcement of the receiver's: the receiver announces its tokens to it
// at once instead of at its next round.
type Watch struct {
	// Op is "add", "drop" or "sync".
	Op string `json:"op"`
	// UserID owns the anchor keyspace the token lives in.
	UserID int64  `json:"userId"`
	Token  string `json:"token"`
}

// Event is one committed change, replayed against another region's session
// rows. On the wire it always carries sessionOnly: true and hop: 1.
type Event struct {
	// Family is "fs" or "kv"; the matching field below is set.
	Family      string `json:"family"`
	OwnerUserID int64  `json:"ownerUserId"`
	// ActingUserID is who caused the change, so `self` is right on the far
	// side. Zero means absent.
	ActingUserID int64 `json:"actingUserId,omitempty"`
	// ID and TS (unix milliseconds) are the emitter's, so both copies match.
	ID string    `json:"id"`
	TS int64     `json:"ts"`
	FS *FSChange `json:"fs,omitempty"`
	KV *KVChange `json:"kv,omitempty"`
}

// FSChange is the fs part of an [Event].
type FSChange struct {
	// Key is the fs operation: write, add, move or remove.
	Key       string       `json:"key"`
	Entry     FSEntry      `json:"entry"`
	Ancestors []FSRef      `json:"ancestors"`
	MovedFrom *FSMovedFrom `json:"movedFrom,omitempty"`
}

// FSEntry is the file or directory an fs change is about.
type FSEntry struct {
	UID    string `json:"uid"`
	Path   string `json:"path"`
	UserID int64  `json:"userId"`
	IsDir  bool   `json:"isDir,omitempty"`
}

// FSRef names one ancestor directory.
type FSRef struct {
	UID  string `json:"uid"`
	Path string `json:"path"`
}

// FSMovedFrom is where a moved entry used to be.
type FSMovedFrom struct {
	Path      string  `json:"path"`
	Ancestors []FSRef `json:"ancestors"`
}

// KVChange is the kv part of an [Event].
type KVChange struct {
	UserUUID string `json:"userUuid"`
	AppUID   string `json:"appUid"`
	KVKey    string `json:"kvKey"`
	// Op is set, del or expire.
	Op string `json:"op"`
	// Value is the value after the change, pre-encoded, when small enough
	// to carry. Nil omits it.
	Value json.RawMessage `json:"value,omitempty"`
}

// Bump says a subscription-set or presence generation moved in the sending
// region.
type Bump struct {
	UserID     int64 `json:"userId"`
	Generation int64 `json:"generation"`
	// Scope is "subscription" or "presence": which cache the receiver
	// invalidates.
	Scope string `json:"scope"`
	// Durable says, for the subscription scope, whether the table changed.
	Durable bool `json:"durable"`
}

// Kind implements [Item].
func (*Delivery) Kind() Kind { return KindDelivery }

// Kind implements [Item].
func (*Ack) Kind() Kind { return KindAck }

// Kind implements [Item].
func (*Watch) Kind() Kind { return KindWatch }

// Kind implements [Item].
func (*Event) Kind() Kind { return KindEvent }

// Kind implements [Item].
func (*Bump) Kind() Kind { return KindBump }

func (d *Delivery) appendWire(b []byte) ([]byte, int, []byte) {
	b = append(b, `{"kind":"delivery"`...)
	b = appendInt(b, "userId", d.UserID)
	if d.AppUID == "" {
		b = append(b, `,"appUid":null`...)
	} else {
		b = appendStr(b, "appUid", d.AppUID)
	}
	b = appendStr(b, "subId", d.SubID)
	b = appendKey(b, "event")
	cut, raw := len(b), []byte(d.Event)
	if len(raw) == 0 {
		b = append(b, "null"...)
		cut, raw = len(b), nil
	}
	if d.AckRequired {
		b = appendBool(b, "ackRequired", true)
	}
	if d.AckID != "" {
		b = appendStr(b, "ackId", d.AckID)
	}
	if d.Origin != "" {
		b = appendStr(b, "origin", d.Origin)
	}
	b = append(b, '}')
	return b, cut, raw
}

func (a *Ack) appendWire(b []byte) ([]byte, int, []byte) {
	b = append(b, `{"kind":"ack"`...)
	b = appendInt(b, "userId", a.UserID)
	b = appendStr(b, "subId", a.SubID)
	b = appendStr(b, "entryId", a.EntryID)
	b = append(b, '}')
	return b, len(b), nil
}

func (w *Watch) appendWire(b []byte) ([]byte, int, []byte) {
	b = append(b, `{"kind":"watch"`...)
	b = appendStr(b, "op", w.Op)
	b = appendInt(b, "userId", w.UserID)
	b = appendStr(b, "token", w.Token)
	b = append(b, '}')
	return b, len(b), nil
}

func (u *Bump) appendWire(b []byte) ([]byte, int, []byte) {
	b = append(b, `{"kind":"bump"`...)
	b = appendInt(b, "userId", u.UserID)
	b = appendInt(b, "generation", u.Generation)
	b = appendStr(b, "scope", u.Scope)
	b = appendBool(b, "durable", u.Durable)
	b = append(b, '}')
	return b, len(b), nil
}

func appendRefs(b []byte, key string, refs []FSRef) []byte {
	b = appendKey(b, key)
	b = append(b, '[')
	for i, r := range refs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendStr(b, "uid", r.UID)
		b = appendStr(b, "path", r.Path)
		b = append(b, '}')
	}
	return append(b, ']')
}

func (e *Event) appendWire(b []byte) ([]byte, int, []byte) {
	b = append(b, `{"kind":"event"`...)
	b = appendStr(b, "family", e.Family)
	b = appendInt(b, "ownerUserId", e.OwnerUserID)
	if e.ActingUserID != 0 {
		b = appendInt(b, "actingUserId", e.ActingUserID)
	}
	b = appendStr(b, "id", e.ID)
	b = appendInt(b, "ts", e.TS)
	b = append(b, `,"sessionOnly":true,"hop":1`...)
	if f := e.FS; f != nil {
		b = appendKey(b, "fs")
		b = append(b, '{')
		b = appendStr(b, "key", f.Key)
		b = appendKey(b, "entry")
		b = append(b, '{')
		b = appendStr(b, "uid", f.Entry.UID)
		b = appendStr(b, "path", f.Entry.Path)
		b = appendInt(b, "userId", f.Entry.UserID)
		if f.Entry.IsDir {
			b = appendBool(b, "isDir", true)
		}
		b = append(b, '}')
		b = appendRefs(b, "ancestors", f.Ancestors)
		if m := f.MovedFrom; m != nil {
			b = appendKey(b, "movedFrom")
			b = append(b, '{')
			b = appendStr(b, "path", m.Path)
			b = appendRefs(b, "ancestors", m.Ancestors)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	cut, raw := -1, []byte(nil)
	if k := e.KV; k != nil {
		b = appendKey(b, "kv")
		b = append(b, '{')
		b = appendStr(b, "userUuid", k.UserUUID)
		b = appendStr(b, "appUid", k.AppUID)
		b = appendStr(b, "kvKey", k.KVKey)
		b = appendStr(b, "op", k.Op)
		if len(k.Value) > 0 {
			// Last member, so the value is the one spliced segment.
			b = appendKey(b, "value")
			cut, raw = len(b), []byte(k.Value)
		}
		b = append(b, '}')
	}
	b = append(b, '}')
	if cut < 0 {
		cut = len(b)
	}
	return b, cut, raw
}

// AppendJSON appends the wire encoding of it to b: what a batch body
// carries for the item.
func AppendJSON(b []byte, it Item) []byte {
	enc, cut, raw := it.appendWire(nil)
	b = append(b, enc[:cut]...)
	b = append(b, raw...)
	return append(b, enc[cut:]...)
}

// IsGapMarker reports whether it is a delivery whose event says op "gap":
// the item that tells a subscription events were lost. The queue sheds
// markers last.
func IsGapMarker(it Item) bool {
	d, ok := it.(*Delivery)
	return ok && isGapEvent(d.Event)
}

var gapValue = []byte(`"gap"`)

// gapPrefilterMax is the largest event isGapEvent searches before scanning.
const gapPrefilterMax = 1024

func isGapEvent(ev []byte) bool {
	// Every push asks this. A marker's JSON must contain the bytes "gap": for
	// small events a vectorised search rules out almost all of them cheaper
	// than the member scan. Large events skip it: the scan stops at "op",
	// usually near the start, while the search would read every byte.
	if len(ev) <= gapPrefilterMax && !bytes.Contains(ev, gapValue) {
		return false
	}
	return string(topLevel(ev, "op")) == `"gap"`
}

// Errors of [DecodeBatch]: the receiver answers 400 for both.
var (
	// ErrMalformed means the body is not the JSON of a batch.
	ErrMalformed = errors.New("forward: malformed batch")
	// ErrBadItem means an item of a known kind lacks a required field or
	// has a value out of its set.
	ErrBadItem = errors.New("forward: bad item")
)

// Batch is what a peer receives: the sending region's claim of who it is,
// informational only (the receiver acts on the signed peer id), and the
// items in push order.
type Batch struct {
	From string
	// Epoch, Seq and Base order a peer's batches (zero in a batch that
	// does not carry them, which is applied as it comes). Epoch names the
	// sender's run, larger for a later run; Seq numbers the run's batches
	// from 1 in the order they were taken; Base is the lowest number of
	// that run whose send had not returned when this one was taken, so
	// nothing below it is worth waiting for.
	Epoch, Seq, Base uint64
	Items            []Item
	// Unknown is how many items of unknown kinds the body held: they are
	// skipped, not in Items.
	Unknown int
}

type wireBatch struct {
	From  *string     `json:"from"`
	Epoch uint64      `json:"epoch"`
	Seq   uint64      `json:"seq"`
	Base  uint64      `json:"base"`
	Items *batchItems `json:"items"`
}

// checkOrder says why a batch's numbering is unusable, or "".
func (b *Batch) checkOrder() string {
	if b.Seq == 0 {
		if b.Epoch != 0 || b.Base != 0 {
			return "epoch or base without seq"
		}
		return ""
	}
	if b.Epoch == 0 || b.Base == 0 || b.Base > b.Seq {
		return "seq without an epoch, or base not in 1..seq"
	}
	return ""
}

type wireKind struct {
	Kind string `json:"kind"`
}

// wireDelivery lets appUid be null.
type wireDelivery struct {
	Delivery
	AppUID *string `json:"appUid"`
}

// DecodeBatch parses a batch body. Items of unknown kinds are skipped and
// counted in Batch.Unknown; a known kind with a missing field or a value
// outside its set fails the whole batch with [ErrBadItem], since only a
// broken sender produces one.
func DecodeBatch(body []byte) (Batch, error) {
	var wb wireBatch
	if err := json.Unmarshal(body, &wb); err != nil {
		return Batch{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if wb.From == nil || wb.Items == nil {
		return Batch{}, fmt.Errorf("%w: needs from and items", ErrMalformed)
	}
	out := Batch{From: *wb.From, Epoch: wb.Epoch, Seq: wb.Seq, Base: wb.Base, Items: wb.Items.items, Unknown: wb.Items.unknown}
	if why := out.checkOrder(); why != "" {
		return Batch{}, fmt.Errorf("%w: %s", ErrMalformed, why)
	}
	if wb.Items.err != nil {
		return Batch{}, wb.Items.err
	}
	return out, nil
}

// batchItems decodes a batch's items one at a time, as json.Unmarshal
// reaches them, each into one reused wireFlat, and keeps only the items
// they make. Decoded all at once, into a []wireFlat (about 250 bytes an
// element) or a []json.RawMessage, a signed body at the default cap made
// of 131,000 `{}` items took about 190 MiB to decode, and a body is decoded
// after its reading slot, which bounds the memory of bodies, is released.
type batchItems struct {
	items   []Item
	unknown int
	err     error // the first item that does not decode; the rest are not read
}

// UnmarshalJSON implements [json.Unmarshaler]. json.Unmarshal has checked
// the whole body's syntax before it calls this.
func (bi *batchItems) UnmarshalJSON(b []byte) error {
	// A repeated "items" replaces the earlier one, as it did a slice.
	*bi = batchItems{items: []Item{}}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return errors.New("items is not an array")
	}
	var w wireFlat
	for i := 0; dec.More(); i++ {
		start := dec.InputOffset()
		// Cleared for each item: the one before may hold its Event's
		// bytes and its FS and KV, which its item keeps.
		w = wireFlat{}
		err := dec.Decode(&w)
		if err == nil {
			it, known := w.item()
			if !known {
				bi.unknown++
				continue
			}
			if validItem(it) == "" {
				bi.items = append(bi.items, it)
				continue
			}
		} else if ute := (*json.UnmarshalTypeError)(nil); !errors.As(err, &ute) {
			return err
		}
		// A field whose type clashes with a known kind's (a newer kind,
		// or a broken item), or a bad item: decoded on its own, which
		// keeps a newer kind's item as unknown and says what is wrong
		// with a bad one.
		raw := bytes.TrimLeft(b[start:dec.InputOffset()], ", \t\r\n")
		it, err := decodeItem(raw)
		switch {
		case err != nil:
			bi.err = fmt.Errorf("item %d: %w", i, err)
			return nil
		case it == nil:
			bi.unknown++
		default:
			bi.items = append(bi.items, it)
		}
	}
	return nil
}

func decodeItem(raw []byte) (Item, error) {
	var k wireKind
	if err := json.Unmarshal(raw, &k); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var it Item
	switch Kind(k.Kind) {
	case KindDelivery:
		var w wireDelivery
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		d := w.Delivery
		if w.AppUID != nil {
			d.AppUID = *w.AppUID
		}
		it = &d
	case KindAck:
		it = &Ack{}
	case KindWatch:
		it = &Watch{}
	case KindEvent:
		it = &Event{}
	case KindBump:
		it = &Bump{}
	default:
		return nil, nil
	}
	if _, ok := it.(*Delivery); !ok {
		if err := json.Unmarshal(raw, it); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
	}
	if why := validItem(it); why != "" {
		return nil, fmt.Errorf("%w: %s %s", ErrBadItem, k.Kind, why)
	}
	return it, nil
}

// wireFlat holds the fields of every known kind at once. No two kinds use
// one name with different types, so an item of a known kind decodes in one
// pass; an item that does not (a newer kind with clashing fields, a bad
// item) is decoded again on its own (decodeItem).
type wireFlat struct {
	Kind         string          `json:"kind"`
	UserID       int64           `json:"userId"`
	AppUID       *string         `json:"appUid"`
	SubID        string          `json:"subId"`
	Event        json.RawMessage `json:"event"`
	AckRequired  bool            `json:"ackRequired"`
	AckID        string          `json:"ackId"`
	Origin       string          `json:"origin"`
	EntryID      string          `json:"entryId"`
	Op           string          `json:"op"`
	Token        string          `json:"token"`
	Family       string          `json:"family"`
	OwnerUserID  int64           `json:"ownerUserId"`
	ActingUserID int64           `json:"actingUserId"`
	ID           string          `json:"id"`
	TS           int64           `json:"ts"`
	FS           *FSChange       `json:"fs"`
	KV           *KVChange       `json:"kv"`
	Generation   int64           `json:"generation"`
	Scope        string          `json:"scope"`
	Durable      bool            `json:"durable"`
}

// item is the item w holds, and false for a kind this package does not
// know.
func (w *wireFlat) item() (Item, bool) {
	switch Kind(w.Kind) {
	case KindDelivery:
		d := &Delivery{UserID: w.UserID, SubID: w.SubID, Event: w.Event, AckRequired: w.AckRequired, AckID: w.AckID, Origin: w.Origin}
		if w.AppUID != nil {
			d.AppUID = *w.AppUID
		}
		return d, true
	case KindAck:
		return &Ack{UserID: w.UserID, SubID: w.SubID, EntryID: w.EntryID}, true
	case KindWatch:
		return &Watch{Op: w.Op, UserID: w.UserID, Token: w.Token}, true
	case KindEvent:
		return &Event{Family: w.Family, OwnerUserID: w.OwnerUserID, ActingUserID: w.ActingUserID, ID: w.ID, TS: w.TS, FS: w.FS, KV: w.KV}, true
	case KindBump:
		return &Bump{UserID: w.UserID, Generation: w.Generation, Scope: w.Scope, Durable: w.Durable}, true
	}
	return nil, false
}

// CheckItem returns an error wrapping [ErrBadItem] if a receiver would
// refuse it: the same checks as [DecodeBatch], which fails the whole batch
// for one such item. [PeerQueue.Push] refuses the items it reports. It does not
// parse the pre-encoded payloads (Delivery.Event, KVChange.Value) beyond
// their first byte: their being valid JSON is left to the caller, as the
// queue never scans them whole.
func CheckItem(it Item) error {
	if isNilItem(it) {
		return fmt.Errorf("%w: nil %T", ErrBadItem, it)
	}
	if why := validItem(it); why != "" {
		return fmt.Errorf("%w: %s %s", ErrBadItem, it.Kind(), why)
	}
	return nil
}

// isNilItem reports whether it is nil or a nil pointer of a known kind,
// which has nothing to encode or to name in a gap marker.
func isNilItem(it Item) bool {
	switch v := it.(type) {
	case nil:
		return true
	case *Delivery:
		return v == nil
	case *Ack:
		return v == nil
	case *Watch:
		return v == nil
	case *Event:
		return v == nil
	case *Bump:
		return v == nil
	}
	return false
}

// validItem returns why an item of a known kind is unusable, or "": on a
// decoded item for the receiver, and on a pushed one for the queue.
func validItem(it Item) string {
	switch v := it.(type) {
	case *Delivery:
		if v.SubID == "" {
			return "without subId"
		}
		// A decoded event starts at its '{'; a pushed one may carry
		// whitespace before it, valid JSON that decodes the same.
		if i := skipWS(v.Event, 0); i >= len(v.Event) || v.Event[i] != '{' {
			return "without an event object"
		}
	case *Ack:
		if v.SubID == "" || v.EntryID == "" {
			return "without subId or entryId"
		}
	case *Watch:
		switch {
		case v.Op == "sync":
			// Names no token: the sender asks for every one.
		case v.Op != "add" && v.Op != "drop":
			return "op not add, drop or sync"
		case v.Token == "":
			return "without token"
		}
	case *Event:
		switch {
		case v.Family == "fs" && v.FS != nil, v.Family == "kv" && v.KV != nil:
		default:
			return "family not fs or kv with its part"
		}
		if v.ID == "" {
			return "without id"
		}
	case *Bump:
		if v.Scope != "subscription" && v.Scope != "presence" {
			return "scope not subscription or presence"
		}
	}
	return ""
}
