package forward

// Size bounds shared by the sending queue and the receiver. The receiver
// refuses a body larger than one batch our queue can build, before reading
// it; the queue refuses, at Push, an item that would let a batch grow past
// that.
const (
	// MaxItemBytesDefault is the largest encoded item a queue takes with
	// the default bounds: half a batch. Forward carries debounced events,
	// acks and watches, none of them near this.
	MaxItemBytesDefault = 128 << 10
	// MaxFromBytes is the longest QueueConfig.From, as JSON-encoded into
	// every body, so the body's wrapper has a fixed bound.
	MaxFromBytes = 256
	// batchWrapperMax bounds a body without its items and their commas:
	// {"from":F,"epoch":E,"seq":S,"base":B,"items":[ ]} is 103 bytes plus
	// F (at most MaxFromBytes), with E, S and B at their longest (19, 20
	// and 20 digits); the rest is headroom.
	batchWrapperMax = MaxFromBytes + 128
	// MaxBodyBytesDefault is the largest body a queue with the default
	// bounds produces, and so the receiver's default body cap:
	// BatchBodyLimit(MaxBatchBytesDefault, MaxItemBytesDefault,
	// MaxBatchItemsDefault), 393,798 bytes (about 385 KiB).
	MaxBodyBytesDefault = MaxBatchBytesDefault - 1 + MaxItemBytesDefault + (MaxBatchItemsDefault - 1) + batchWrapperMax
)

// BatchBodyLimit is the largest body a queue with these bounds produces. A
// batch closes once its items reach maxBatchBytes, so before its last item
// it holds at most maxBatchBytes-1 bytes of items; the last is at most
// maxItemBytes; then one comma between items and the wrapper.
func BatchBodyLimit(maxBatchBytes, maxItemBytes int64, maxBatchItems int) int64 {
	return maxBatchBytes - 1 + maxItemBytes + int64(maxBatchItems-1) + batchWrapperMax
}
