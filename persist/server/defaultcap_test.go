package server

import "testing"

// The default cap is the lower of the descriptor and the memory bounds,
// both shared by the servers of a process, and at least 16.
func TestMaxOpenStreamsFor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		limit   uint64
		servers int
		want    int
	}{
		{1024, 1, 256},                     // (1024 - 256) / 3
		{1024, 2, 128},                     // shared by two
		{100000, 1, MaxOpenStreamsDefault}, // memory: 256 MiB / 210 KiB
		{100000, 2, MaxOpenStreamsDefault / 2},
		{0, 1, MaxOpenStreamsDefault}, // the limit unknown: memory alone
		{300, 1, 16},                  // never below 16
	} {
		if got := maxOpenStreamsFor(c.limit, c.servers); got != c.want {
			t.Errorf("maxOpenStreamsFor(%d, %d) = %d, want %d", c.limit, c.servers, got, c.want)
		}
	}
	if MaxOpenStreamsDefault != 1248 {
		t.Errorf("MaxOpenStreamsDefault = %d, the docs say 1,248", MaxOpenStreamsDefault)
	}
}

// TestMaxOpenStreamsUnlimitedDescriptors: a descriptor limit past int64
// (RLIM_INFINITY, the BSDs' "unlimited") bounds nothing, as 0 does; it
// became -1, and the smallest cap.
func TestMaxOpenStreamsUnlimitedDescriptors(t *testing.T) {
	t.Parallel()
	for _, limit := range []uint64{^uint64(0), 1 << 63} {
		if got := maxOpenStreamsFor(limit, 1); got != MaxOpenStreamsDefault {
			t.Errorf("maxOpenStreamsFor(%d, 1) = %d, want %d (an unlimited descriptor limit leaves the memory bound)", limit, got, MaxOpenStreamsDefault)
		}
	}
}
