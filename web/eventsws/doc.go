// Package eventsws is the WebSocket API of the events layer: GET
// /ws/events carries a browser's session subscriptions to an
// events.Router — subscribe on an anchor with an optional filter,
// unsubscribe, ack — and the router's events and gap markers back, as JSON
// text messages (docs/events.md, "WebSocket API"). It embeds the JS client
// (/ws/events.js) and a page to try it (/events), and authorizes as the
// watch gateway does: a tenant subscribes only to anchors in the scopes it
// may read.
package eventsws
