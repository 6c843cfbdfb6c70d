// Package nntp is a streaming NNTP client (RFC 3977) and a resizable
// connection pool.
//
// A [Conn] is one connection to a news server: plain, implicit TLS or
// STARTTLS (RFC 4642), AUTHINFO USER/PASS (RFC 4643), compression (RFC 8054
// COMPRESS DEFLATE, or XFEATURE COMPRESS GZIP for overview data), and the
// reader commands an indexer needs: GROUP, LIST ACTIVE, LIST OVERVIEW.FMT,
// OVER/XOVER, HEAD, BODY, ARTICLE, STAT and POST. Multi-line responses are
// streamed line by line to the caller; a 20,000-line OVER costs one line of
// buffer. The few kept whole (CAPABILITIES, LIST OVERVIEW.FMT, HEAD) are
// bounded at 1 MiB.
//
// A [Pool] shares connections to one server among goroutines. Its size can
// change at run time ([Pool.Resize]); when the server answers "too many
// connections" the pool lowers the number it may open to the number already
// running and restores it later.
//
// Every malformed server response becomes a [*ProtocolError] naming the
// command and the offending line; a well-formed refusal is a [*StatusError]
// carrying the code.
package nntp
