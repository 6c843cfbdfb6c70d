package store

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// writeN appends n unkeyed messages and returns their seqs.
func writeN(t *testing.T, s Stream, n int, now time.Time) []uint64 {
	t.Helper()
	ops := make([]WriteOp, n)
	for i := range ops {
		ops[i].Value = []byte("v")
	}
	res, _, err := s.Write(ops, now)
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]uint64, n)
	for i, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		seqs[i] = r.Seq
	}
	return seqs
}

// TestDeleteDedup: a delete repeated with the same id removes nothing more
// and answers what the first one removed, for every selector, also after the
// stream is closed and reopened (the id is stored with the removal), until
// the window ends.
func TestDeleteDedup(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		del  func(seqs []uint64) persist.Delete
	}{
		{"one seq", func(q []uint64) persist.Delete { return persist.Delete{Seqs: q[1:2]} }},
		{"seqs", func(q []uint64) persist.Delete { return persist.Delete{Seqs: []uint64{q[0], q[2], 999}} }},
		{"up to", func(q []uint64) persist.Delete { return persist.Delete{UpTo: q[1]} }},
		{"all", func(q []uint64) persist.Delete { return persist.Delete{All: true} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			now := time.Now()
			open := func(at time.Time) Stream {
				t.Helper()
				s, err := NewSQLite(SQLiteConfig{Dir: dir}).Open("hub", "d", at)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			s := open(now)
			seqs := writeN(t, s, 3, now)
			d := tc.del(seqs)
			d.MsgID = "del-1"
			first, changes, err := s.Delete(d, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(first.Seqs) == 0 || first.Dup || len(changes) != 1 {
				t.Fatalf("first delete: %+v, changes %+v", first, changes)
			}
			// New messages a repeated up-to or all would now remove.
			more := writeN(t, s, 2, now)
			if d.UpTo > 0 {
				d.UpTo = more[1]
			}
			again := func(s Stream, at time.Time) {
				t.Helper()
				r, changes, err := s.Delete(d, at)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Dup || !slices.Equal(r.Seqs, first.Seqs) || len(changes) != 0 {
					t.Fatalf("repeat: %+v, changes %+v; want the first answer %v", r, changes, first.Seqs)
				}
				if n := inventory(t, s).Count; n != int64(3-len(first.Seqs)+2) {
					t.Fatalf("repeat removed something: %d messages left", n)
				}
			}
			again(s, now.Add(time.Second))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(now.Add(2 * time.Second))
			defer s.Close()
			again(s, now.Add(DedupWindow-time.Second))

			// Another id is another delete.
			d.MsgID = "del-2"
			r, _, err := s.Delete(d, now.Add(3*time.Second))
			if err != nil || r.Dup {
				t.Fatalf("other id: %+v, %v", r, err)
			}
		})
	}
}

// TestDeleteDedupWindowEnds: a delete id is forgotten after DedupWindow, in
// memory and in the file, and then names a new delete.
func TestDeleteDedupWindowEnds(t *testing.T) {
	t.Parallel()
	now := time.Now()
	s, err := NewSQLite(SQLiteConfig{Dir: t.TempDir()}).Open("hub", "d", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seqs := writeN(t, s, 2, now)
	if _, _, err := s.Delete(persist.Delete{Seqs: seqs[:1], MsgID: "x"}, now); err != nil {
		t.Fatal(err)
	}
	if !s.NeedsExpiry() {
		t.Fatal("a remembered delete id does not ask for expiry")
	}
	later := now.Add(DedupWindow + time.Second)
	if _, err := s.Expire(later); err != nil {
		t.Fatal(err)
	}
	ss := s.(*sqliteStream)
	var rows int
	if err := ss.conn.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM delids`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || ss.delidsOldest != 0 || s.NeedsExpiry() {
		t.Fatalf("after the window: %d rows, oldest %d", rows, ss.delidsOldest)
	}
	r, _, err := s.Delete(persist.Delete{Seqs: seqs[1:], MsgID: "x"}, later)
	if err != nil || r.Dup || !slices.Equal(r.Seqs, seqs[1:]) {
		t.Fatalf("after the window: %+v, %v", r, err)
	}
}

// TestDeleteIDsOldFile: a stream file made before delete ids existed (no
// delids table) opens, and deletes with ids work on it.
func TestDeleteIDsOldFile(t *testing.T) {
	t.Parallel()
	now := time.Now()
	st, p := fullSchemaStream(t)
	s, err := st.Open("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	seqs := writeN(t, s, 2, now)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", fileURI(p))
	if err != nil {
		t.Fatal(err)
	}
	// A file from before delids also predates the schema version (0).
	if _, err := db.Exec(`DROP INDEX delids_time; DROP TABLE delids; PRAGMA user_version = 0`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = st.Open("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		r, _, err := s.Delete(persist.Delete{Seqs: seqs, MsgID: "x"}, now)
		if err != nil || !slices.Equal(r.Seqs, seqs) {
			t.Fatalf("delete on an old file: %+v, %v", r, err)
		}
	}
}

func TestSeqRuns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		seqs []uint64
	}{
		{"none", []uint64{}},
		{"one", []uint64{7}},
		{"run", []uint64{1, 2, 3, 4}},
		{"gaps", []uint64{1, 3, 4, 5, 9, 100, 101}},
		{"largest", []uint64{1, maxSeq - 1, maxSeq}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := encodeSeqRuns(tc.seqs)
			got, err := decodeSeqRuns(b)
			if err != nil || !slices.Equal(got, tc.seqs) {
				t.Fatalf("decode(encode(%v)) = %v, %v", tc.seqs, got, err)
			}
		})
	}
	if b := encodeSeqRuns([]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}); len(b) != 2 {
		t.Errorf("a run of 10 takes %d bytes, want 2", len(b))
	}
	for _, bad := range [][]byte{{0x80}, {1}, {1, 0x80}} {
		if _, err := decodeSeqRuns(bad); err == nil {
			t.Errorf("decode(%x) accepted", bad)
		}
	}
}
