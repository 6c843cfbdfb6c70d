package forward

// entry is one held item with its encoding, computed once at push.
type entry struct {
	item Item
	enc  []byte // the encoding with raw cut out at cut
	raw  []byte // caller's pre-encoded segment, referenced, never copied
	seq  uint64 // push order across both rings of a peer
	cut  int32
}

func (e *entry) size() int64 { return int64(len(e.enc) + len(e.raw)) }

func (e *entry) appendTo(b []byte) []byte {
	b = append(b, e.enc[:e.cut]...)
	b = append(b, e.raw...)
	return append(b, e.enc[e.cut:]...)
}

// ring is a growable FIFO of entries: push at the tail, pop at the head,
// both O(1), so shedding the oldest item never shifts the rest.
type ring struct {
	buf  []entry
	head int
	n    int
}

func (r *ring) len() int { return r.n }

func (r *ring) push(e entry) {
	if r.n == len(r.buf) {
		size := 2 * len(r.buf)
		if size == 0 {
			size = 16
		}
		buf := make([]entry, size)
		k := copy(buf, r.buf[r.head:])
		copy(buf[k:], r.buf[:r.head])
		r.buf, r.head = buf, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
}

// front returns the oldest entry; the ring must not be empty.
func (r *ring) front() *entry { return &r.buf[r.head] }

// pop removes and returns the oldest entry; the ring must not be empty.
func (r *ring) pop() entry {
	e := r.buf[r.head]
	// Zero the slot so the ring does not keep a shed item alive.
	r.buf[r.head] = entry{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return e
}

// reset empties the ring, releasing a large buffer: a peer that once backed
// up to its bound should not keep that much memory once it drains.
func (r *ring) reset() {
	if len(r.buf) > 1024 {
		r.buf = nil
	} else {
		clear(r.buf)
	}
	r.head, r.n = 0, 0
}
