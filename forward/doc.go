// Package forward moves items between regions in bounded, signed batches.
//
// A [PeerQueue] holds items per peer and ships them as one batch per peer per
// flush window, never one request per item. Each peer's backlog is bounded in
// items and in encoded bytes; what does not fit is shed oldest first and
// handed to an overflow callback, so loss is always reported ([GapPolicy]
// turns it into gap markers for the subscriptions that lost events). A batch
// whose send fails is reported the same way. Several batches per peer may be
// in flight; they are numbered, and a [Receiver] applies them in that order.
//
// A [Sender] ships batches over HTTP with one keep-alive connection pool per
// peer and signs every request's headers with HMAC-SHA256: the peer id,
// the destination peer's id, timestamp, nonce, body length and body
// SHA-256 (wire protocol version 3, [ProtocolVersion]). A [Receiver]
// checks the signature, that it was signed for itself, the timestamp
// window and a per-peer nonce window from the headers alone, before it
// reads a byte of the body; then it checks the body is the one signed and
// hands the items to a [Sink] in a fixed order.
//
// The queue and the sender follow switchyard's one lifecycle (Start, then
// Stop with a deadline; see internal/lifecycle): the queue's Stop drains
// what it holds through the sender, so stop the sender after it. The
// package imports nothing else of switchyard's but internal/lifecycle,
// which is the standard library only.
package forward
