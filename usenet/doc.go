// Package usenet is the reference application of switchyard: a usenet
// header indexer. It parses overview lines into parts (the file name, the
// part counter p/t and the file counter i/n of a subject), assembles parts
// into binaries (files) and binaries into releases, assigns Newznab
// categories and writes NZB 1.1 files.
//
// Assembly is keyed so that its result does not depend on how articles were
// split into ranges, in which order ranges finished or how many workers ran:
// a binary is keyed by (poster, subject without its part counter, part
// count), a collection by (poster, base name, announced file count), an
// article counts once by its message-id, and every merge is a union. A
// collection's releases are its posts, cut from its binaries by posting
// date (Collection.Posts), so a repost is a release of its own. The records live in
// persist (Store); the search index and the Newznab API that serve them are
// in the subpackages search and newznab.
package usenet
