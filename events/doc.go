// Package events delivers the committed changes of persist to subscribers:
// live subscriptions on anchors (a key and every key below it), coalesced
// and rate limited, with every loss turned into a gap marker that names its
// reason, `single` deliveries under a lease with acks, and presence.
//
// This file set holds the parts that decide, without I/O or goroutines of
// their own, so each is tested alone with a fake clock:
//
//   - Subject and Anchor: an event's subject is scope/stream/key, a key may
//     be a path, and an anchor matches its own subject and every one below
//     it (Subject.Anchors lists the tokens an event is looked up under).
//   - Filter: the families an anchor takes (set, delete) and a glob on the
//     rest of the path.
//   - Index: subscriptions by anchor token; Match finds an event's
//     subscriptions by looking up its own token and each ancestor's, never
//     by scanning, within the fan-out limits (beyond them, a gap).
//   - Coalescer: one delivery per (subscription, subject) per window, the
//     newest payload winning.
//   - Limiter: deliveries per subscription over a sliding minute.
//   - Single: the lease table of a `single` subscription: one delivery in
//     flight, the next after its ack, redelivery when a lease expires, a
//     bounded backlog shed oldest first into one gap marker.
//   - Presence: one row per (user, app, region), written by the first
//     connection and removed after a delayed leave.
//
// See docs/events.md for the model: what is delivered at most once, what at
// least once, and every gap reason.
package events
