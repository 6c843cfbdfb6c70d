package store

import (
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// TestRateLimitsCountWrites: the rate limits count what was written in
// the last second, not the rows that remain of it. They counted rows, so
// a keyed stream (each set deletes its key's older row) or one under
// max_msgs (each write deletes the oldest) never reached its limit.
func TestRateLimitsCountWrites(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		patch string
		op    WriteOp
	}{
		{"keyed sets", `{"max_msgs_per_second": 2}`, WriteOp{Key: "k", Value: []byte("v")}},
		{"under max_msgs", `{"max_msgs_per_second": 2, "max_msgs": 1}`, WriteOp{Value: []byte("v")}},
		{"bytes, keyed", `{"max_bytes_per_second": 250}`, WriteOp{Key: "k", Value: make([]byte, 100)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now := time.UnixMilli(1_700_000_000_000)
			s, err := NewSQLite(SQLiteConfig{Dir: t.TempDir()}).Open("acct", "rates", now)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c, err := MergeConfig(s.Config(), []byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.SetConfig(c, now); err != nil {
				t.Fatal(err)
			}
			write := func(at time.Time) persist.Code {
				t.Helper()
				res, _, err := s.Write([]WriteOp{tc.op}, at)
				if err != nil {
					t.Fatal(err)
				}
				if res[0].Err != nil {
					return res[0].Err.Code
				}
				return ""
			}
			// Two pass in the second, the third is refused, at its start
			// and at its end; a second later the window is clear again.
			got := []persist.Code{write(now), write(now.Add(10 * time.Millisecond)), write(now.Add(20 * time.Millisecond)), write(now.Add(999 * time.Millisecond))}
			want := []persist.Code{"", "", persist.CodeReject, persist.CodeReject}
			if got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
				t.Fatalf("four writes in one second: codes %q, want %q", got, want)
			}
			if code := write(now.Add(1010 * time.Millisecond)); code != "" {
				t.Fatalf("a write once the first two are a second old: %q, want it stored", code)
			}
		})
	}
}
