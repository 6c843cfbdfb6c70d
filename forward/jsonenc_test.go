package forward

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The queue's encoders (jsonenc.go, items.go) and the batch decoder are
// written by hand for speed. These tests hold them to encoding/json, field
// by field, over generated items: what we write decodes, with
// encoding/json, to the same fields as what encoding/json writes for the
// wire shape; and what encoding/json writes, DecodeBatch reads to the same
// items as encoding/json reads.
//
// The wire shape differs from the Go structs in ways encoding/json cannot
// express from them, so the reference is a set of mirror structs: kind on
// every item, appUid null when empty, sessionOnly and hop on every event,
// and ancestors always an array (the seed's type is an array; encoding/json
// would write null for a nil slice, and a JavaScript reader iterating it
// would throw).

type refDelivery struct {
	Kind        string          `json:"kind"`
	UserID      int64           `json:"userId"`
	AppUID      *string         `json:"appUid"`
	SubID       string          `json:"subId"`
	Event       json.RawMessage `json:"event"`
	AckRequired bool            `json:"ackRequired,omitempty"`
	AckID       string          `json:"ackId,omitempty"`
	Origin      string          `json:"origin,omitempty"`
}

type refAck struct {
	Kind    string `json:"kind"`
	UserID  int64  `json:"userId"`
	SubID   string `json:"subId"`
	EntryID string `json:"entryId"`
}

type refWatch struct {
	Kind   string `json:"kind"`
	Op     string `json:"op"`
	UserID int64  `json:"userId"`
	Token  string `json:"token"`
}

type refEvent struct {
	Kind         string    `json:"kind"`
	Family       string    `json:"family"`
	OwnerUserID  int64     `json:"ownerUserId"`
	ActingUserID int64     `json:"actingUserId,omitempty"`
	ID           string    `json:"id"`
	TS           int64     `json:"ts"`
	SessionOnly  bool      `json:"sessionOnly"`
	Hop          int       `json:"hop"`
	FS           *FSChange `json:"fs,omitempty"`
	KV           *KVChange `json:"kv,omitempty"`
}

type refBump struct {
	Kind       string `json:"kind"`
	UserID     int64  `json:"userId"`
	Generation int64  `json:"generation"`
	Scope      string `json:"scope"`
	Durable    bool   `json:"durable"`
}

// refOf is the mirror of it that encoding/json encodes to the wire shape.
func refOf(it Item) any {
	switch v := it.(type) {
	case *Delivery:
		r := refDelivery{Kind: "delivery", UserID: v.UserID, SubID: v.SubID, Event: v.Event,
			AckRequired: v.AckRequired, AckID: v.AckID, Origin: v.Origin}
		if v.AppUID != "" {
			r.AppUID = &v.AppUID
		}
		return r
	case *Ack:
		return refAck{"ack", v.UserID, v.SubID, v.EntryID}
	case *Watch:
		return refWatch{"watch", v.Op, v.UserID, v.Token}
	case *Event:
		r := refEvent{Kind: "event", Family: v.Family, OwnerUserID: v.OwnerUserID, ActingUserID: v.ActingUserID,
			ID: v.ID, TS: v.TS, SessionOnly: true, Hop: 1, KV: v.KV}
		if v.FS != nil {
			fs := *v.FS
			if fs.Ancestors == nil {
				fs.Ancestors = []FSRef{}
			}
			if fs.MovedFrom != nil {
				m := *fs.MovedFrom
				if m.Ancestors == nil {
					m.Ancestors = []FSRef{}
				}
				fs.MovedFrom = &m
			}
			r.FS = &fs
		}
		return r
	case *Bump:
		return refBump{"bump", v.UserID, v.Generation, v.Scope, v.Durable}
	}
	panic(fmt.Sprintf("no mirror for %T", it))
}

// refDecode reads one item with encoding/json alone, the way a reader
// with no hand-written code would.
func refDecode(t *testing.T, raw []byte) Item {
	t.Helper()
	var k struct{ Kind string }
	must(t, json.Unmarshal(raw, &k))
	switch Kind(k.Kind) {
	case KindDelivery:
		var r refDelivery
		must(t, json.Unmarshal(raw, &r))
		d := &Delivery{UserID: r.UserID, SubID: r.SubID, Event: r.Event, AckRequired: r.AckRequired, AckID: r.AckID, Origin: r.Origin}
		if r.AppUID != nil {
			d.AppUID = *r.AppUID
		}
		return d
	case KindAck:
		var r Ack
		must(t, json.Unmarshal(raw, &r))
		return &r
	case KindWatch:
		var r Watch
		must(t, json.Unmarshal(raw, &r))
		return &r
	case KindEvent:
		var r Event
		must(t, json.Unmarshal(raw, &r))
		return &r
	case KindBump:
		var r Bump
		must(t, json.Unmarshal(raw, &r))
		return &r
	}
	t.Fatalf("unknown kind in %s", raw)
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// marshalRef encodes like json.Marshal but leaves <, > and & alone, as our
// encoder does (batches are not HTML). Both spellings decode the same; the
// comparison is on decoded fields anyway.
func marshalRef(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	must(t, enc.Encode(v))
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// generic decodes JSON to maps, slices and json.Numbers.
func generic(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// diffJSON lists the fields where two decoded JSON values differ.
func diffJSON(path string, a, b any) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v vs %v", path, a, b)}
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		var out []string
		for k := range keys {
			x, okA := av[k]
			y, okB := bv[k]
			switch {
			case !okA:
				out = append(out, fmt.Sprintf("%s.%s: missing, reference has %v", path, k, y))
			case !okB:
				out = append(out, fmt.Sprintf("%s.%s: %v, reference has none", path, k, x))
			default:
				out = append(out, diffJSON(path+"."+k, x, y)...)
			}
		}
		sort.Strings(out)
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return []string{fmt.Sprintf("%s: %v vs %v", path, a, b)}
		}
		var out []string
		for i := range av {
			out = append(out, diffJSON(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: %#v vs %#v", path, a, b)}
	}
	return nil
}

// diffItem lists the fields where two decoded items differ; raw JSON
// members (an event, a kv value) are compared decoded.
func diffItem(t *testing.T, a, b Item) []string {
	t.Helper()
	return diffValue(t, fmt.Sprintf("%T", a), reflect.ValueOf(a), reflect.ValueOf(b))
}

var rawType = reflect.TypeFor[json.RawMessage]()

func diffValue(t *testing.T, path string, a, b reflect.Value) []string {
	if a.Type() == rawType {
		if len(a.Bytes()) == 0 || len(b.Bytes()) == 0 {
			if len(a.Bytes()) != len(b.Bytes()) {
				return []string{fmt.Sprintf("%s: %q vs %q", path, a.Bytes(), b.Bytes())}
			}
			return nil
		}
		return diffJSON(path, generic(t, a.Bytes()), generic(t, b.Bytes()))
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return []string{fmt.Sprintf("%s: nil %v vs nil %v", path, a.IsNil(), b.IsNil())}
			}
			return nil
		}
		return diffValue(t, path, a.Elem(), b.Elem())
	case reflect.Struct:
		var out []string
		for i := range a.NumField() {
			out = append(out, diffValue(t, path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))...)
		}
		return out
	case reflect.Slice:
		// nil and empty are the same list on the wire.
		if a.Len() != b.Len() {
			return []string{fmt.Sprintf("%s: %d elements vs %d", path, a.Len(), b.Len())}
		}
		var out []string
		for i := range a.Len() {
			out = append(out, diffValue(t, fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i))...)
		}
		return out
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return []string{fmt.Sprintf("%s: %#v vs %#v", path, a.Interface(), b.Interface())}
	}
	return nil
}

// genString mixes what a JSON string encoder can get wrong: quotes and
// backslashes, control bytes, HTML characters, multi-byte runes, the two
// line separators JavaScript chokes on, and invalid UTF-8.
func genString(r *rand.Rand, nonEmpty bool) string {
	pieces := []string{"a", "Z", "0", " ", `"`, `\`, "/", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
		"<", ">", "&", "é", "€", "😀", "\u2028", "\u2029", "\xff", "\xc3", "\xed\xa0\x80", "ab\xe2\x82", "\ufffd"}
	n := r.IntN(8)
	if nonEmpty {
		n++
	}
	var b strings.Builder
	for range n {
		if r.IntN(3) == 0 {
			b.WriteString(pieces[r.IntN(len(pieces))])
		} else {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return b.String()
}

func genInt(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return 0
	case 1:
		return math.MaxInt64
	case 2:
		return math.MinInt64
	case 3:
		return -r.Int64N(1 << 40)
	}
	return r.Int64N(1 << 53)
}

// genRaw is a valid JSON value built by encoding/json, as the events layer
// would pre-encode an event (object) or a kv value (anything).
func genRaw(t *testing.T, r *rand.Rand, object bool) json.RawMessage {
	t.Helper()
	var v any
	switch k := r.IntN(4); {
	case object || k == 0:
		m := map[string]any{"id": genString(r, true), "op": []string{"write", "gap", "add"}[r.IntN(3)], "ts": genInt(r)}
		if r.IntN(2) == 0 {
			m["data"] = map[string]any{"n": r.Float64(), "list": []any{genString(r, false), true, nil}}
		}
		v = m
	case k == 1:
		v = genString(r, false)
	case k == 2:
		v = genInt(r)
	default:
		v = []any{1, "x", false}
	}
	b, err := json.Marshal(v)
	must(t, err)
	return b
}

func genRefs(r *rand.Rand) []FSRef {
	if r.IntN(4) == 0 {
		return nil
	}
	refs := make([]FSRef, r.IntN(4))
	for i := range refs {
		refs[i] = FSRef{UID: genString(r, false), Path: genString(r, false)}
	}
	return refs
}

// genItem is a valid item of a random kind with random field values.
func genItem(t *testing.T, r *rand.Rand) Item {
	t.Helper()
	switch r.IntN(5) {
	case 0:
		d := &Delivery{UserID: genInt(r), SubID: genString(r, true), Event: genRaw(t, r, true)}
		if r.IntN(2) == 0 {
			d.AppUID = genString(r, true)
		}
		if r.IntN(3) == 0 {
			d.AckRequired, d.AckID, d.Origin = true, genString(r, false), genString(r, false)
		}
		return d
	case 1:
		return &Ack{UserID: genInt(r), SubID: genString(r, true), EntryID: genString(r, true)}
	case 2:
		return &Watch{Op: []string{"add", "drop"}[r.IntN(2)], UserID: genInt(r), Token: genString(r, true)}
	case 3:
		e := &Event{OwnerUserID: genInt(r), ID: genString(r, true), TS: genInt(r)}
		if r.IntN(2) == 0 {
			e.ActingUserID = genInt(r)
		}
		if r.IntN(2) == 0 {
			e.Family = "fs"
			e.FS = &FSChange{Key: genString(r, false), Ancestors: genRefs(r),
				Entry: FSEntry{UID: genString(r, false), Path: genString(r, false), UserID: genInt(r), IsDir: r.IntN(2) == 0}}
			if r.IntN(2) == 0 {
				e.FS.MovedFrom = &FSMovedFrom{Path: genString(r, false), Ancestors: genRefs(r)}
			}
		} else {
			e.Family = "kv"
			e.KV = &KVChange{UserUUID: genString(r, false), AppUID: genString(r, false), KVKey: genString(r, false), Op: genString(r, false)}
			if r.IntN(2) == 0 {
				e.KV.Value = genRaw(t, r, false)
			}
		}
		return e
	default:
		return &Bump{UserID: genInt(r), Generation: genInt(r), Scope: []string{"subscription", "presence"}[r.IntN(2)], Durable: r.IntN(2) == 0}
	}
}

// TestEncodingMatchesEncodingJSON: each item our encoder writes decodes,
// with encoding/json, to the same fields as encoding/json's own encoding
// of the wire shape, and to the item it was made from.
func TestEncodingMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 12))
	for i := range 5000 {
		it := genItem(t, r)
		ours := AppendJSON(nil, it)
		if !json.Valid(ours) {
			t.Fatalf("item %d: invalid JSON %q", i, ours)
		}
		ref := marshalRef(t, refOf(it))
		if d := diffJSON(string(it.Kind()), generic(t, ours), generic(t, ref)); len(d) > 0 {
			t.Fatalf("item %d differs from encoding/json:\n  %s\nours %s\nref  %s", i, strings.Join(d, "\n  "), ours, ref)
		}
		// And back: what encoding/json reads from ours is what it reads
		// from its own (strings with invalid UTF-8 come back as U+FFFD on
		// both sides).
		if d := diffItem(t, refDecode(t, ours), refDecode(t, ref)); len(d) > 0 {
			t.Fatalf("item %d read back differs:\n  %s", i, strings.Join(d, "\n  "))
		}
	}
}

// TestDecodingMatchesEncodingJSON: DecodeBatch reads bodies written by
// encoding/json (and by our encoder) to exactly the items encoding/json
// reads from them, on its fast path and on its item-by-item path.
func TestDecodingMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 12))
	for i := range 500 {
		items := make([]Item, 1+r.IntN(8))
		for j := range items {
			items[j] = genItem(t, r)
		}
		for _, writer := range []string{"encoding/json", "ours"} {
			raws := make([][]byte, len(items))
			for j, it := range items {
				if writer == "ours" {
					raws[j] = AppendJSON(nil, it)
				} else {
					raws[j] = marshalRef(t, refOf(it))
				}
			}
			// An item of a newer kind whose field clashes in type with a
			// known one sends the decoder down its item-by-item path.
			for _, clash := range []bool{false, true} {
				body := []byte(`{"from":"eu","items":[`)
				if clash {
					body = append(body, `{"kind":"future","userId":"not a number"},`...)
				}
				body = append(body, bytes.Join(raws, []byte(","))...)
				body = append(body, "]}"...)
				b, err := DecodeBatch(body)
				if err != nil {
					t.Fatalf("batch %d (%s, clash %v): %v\n%s", i, writer, clash, err, body)
				}
				unknown := 0
				if clash {
					unknown = 1 // the item of a newer kind, skipped
				}
				if len(b.Items) != len(items) || b.Unknown != unknown {
					t.Fatalf("batch %d: %d items and %d unknown, want %d and %d", i, len(b.Items), b.Unknown, len(items), unknown)
				}
				for j := range items {
					if d := diffItem(t, b.Items[j], refDecode(t, raws[j])); len(d) > 0 {
						t.Fatalf("batch %d item %d (%s, clash %v) differs from encoding/json:\n  %s\n%s",
							i, j, writer, clash, strings.Join(d, "\n  "), raws[j])
					}
				}
			}
		}
	}
}
