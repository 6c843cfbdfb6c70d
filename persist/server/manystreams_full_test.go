//go:build manystreams

package server

// manyStreams and manyStreamsCache are TestManyStreamsSmallCache's stream
// count and open-stream cap with the manystreams build tag: the full
// 20,000 streams through a cache of 256 (minutes on the 2-core reference
// machine: creating a stream costs about 4 ms, mostly its fsyncs).
const manyStreams, manyStreamsCache = 20000, 256
