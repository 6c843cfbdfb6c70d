// Package work hands ranges of NNTP articles to workers under fenced
// leases: a planner cuts each group's articles into ranges, coordinator
// shards prefetch ranges' overview lines into spools, workers lease a
// spooled range, hand its lines to an Indexer and finish it under the
// lease's fencing token, and every process that talks to the provider
// shares its connection budget by priority.
//
// All state lives in persist, under one scope per source (one NNTP
// provider): see Store and docs/work.md for the streams and keys. Every
// state change is a compare-and-set on the seq of the record it changes,
// so any number of planners, coordinators and workers in any number of
// processes can run against one source.
package work
