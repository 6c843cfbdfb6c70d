package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// TestZstdRoundTrip: values above compressMin are stored compressed, the
// others raw (as are values with a Content-Encoding), and all read back as
// written.
func TestZstdRoundTrip(t *testing.T) {
	t.Parallel()
	st, err := NewSQLite(SQLiteConfig{Dir: t.TempDir()}).Open("hub", "z", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	big := strings.Repeat("compressible text ", 10000)
	small := strings.Repeat("y", compressMin)
	// A value that says it is compressed already is stored as it is.
	encoded := WriteOp{Value: []byte(big), Headers: map[string]string{persist.HdrContentEncoding: "s2"}}
	res, _, err := st.Write([]WriteOp{{Value: []byte(big)}, {Value: []byte(small)}, encoded}, time.Now())
	if err != nil || res[0].Err != nil || res[1].Err != nil || res[2].Err != nil {
		t.Fatalf("write: %v %+v", err, res)
	}
	for i, want := range []string{big, small} {
		m, err := st.Get(res[i].Seq)
		if err != nil || string(m.Value) != want {
			t.Fatalf("seq %d came back as %d bytes (%v)", res[i].Seq, len(m.Value), err)
		}
	}
	var got []string
	if _, err := st.GetAll(1, 0, 0, func(m *persist.Frame) error { got = append(got, string(m.Value)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != big || got[1] != small || got[2] != big {
		t.Fatal("getAll of a compressed value differs")
	}
	// Look at the file itself: compressed above the threshold only.
	for _, c := range []struct {
		seq     uint64
		enc     int
		maxSize int
	}{{res[0].Seq, encZstd, len(big) / 10}, {res[1].Seq, encRaw, compressMin}, {res[2].Seq, encRaw, len(big)}} {
		var enc, n int
		if err := st.(*sqliteStream).conn.QueryRowContext(context.Background(), `SELECT enc, length(raw) FROM messages WHERE seq = ?`, c.seq).Scan(&enc, &n); err != nil {
			t.Fatal(err)
		}
		if enc != c.enc || n > c.maxSize {
			t.Fatalf("seq %d stored with enc %d in %d bytes", c.seq, enc, n)
		}
	}
}
