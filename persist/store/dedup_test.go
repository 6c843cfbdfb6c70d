package store

import (
	"testing"
	"time"
)

func TestDedupWindowExpires(t *testing.T) {
	t.Parallel()
	st := NewSQLite(SQLiteConfig{Dir: t.TempDir()})
	now := time.Now()
	s, err := st.Open("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func(at time.Time) WriteResult {
		t.Helper()
		res, _, err := s.Write([]WriteOp{{MsgID: "m", Value: []byte("v")}}, at)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	first := write(now)
	if r := write(now.Add(DedupWindow - time.Second)); !r.Dup || r.Seq != first.Seq {
		t.Fatalf("inside the window: %+v", r)
	}
	if _, err := s.Expire(now.Add(DedupWindow + time.Second)); err != nil {
		t.Fatal(err)
	}
	if s.(*sqliteStream).msgids["m"] != (dedupEntry{}) {
		t.Fatal("expired msgID still remembered")
	}
	if r := write(now.Add(DedupWindow + time.Second)); r.Dup || r.Seq == first.Seq {
		t.Fatalf("after the window: %+v", r)
	}
}
