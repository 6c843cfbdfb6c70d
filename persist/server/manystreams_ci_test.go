//go:build !manystreams

package server

// manyStreams and manyStreamsCache are TestManyStreamsSmallCache's stream
// count and open-stream cap in CI: ten times the cache, which cycles it
// many times, in a CI budget (each new stream costs about 4 ms of fsyncs).
// `-tags manystreams` runs the full 20,000 through a cache of 256.
const manyStreams, manyStreamsCache = 320, 32
