package store

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// A config request's desc is bounded (MergeConfig), but a stream whose file
// holds a longer one, stored by an older version, still opens with it, and
// takes patches: one that leaves desc alone, and the reset.
func TestConfigDescBound(t *testing.T) {
	t.Parallel()
	if _, err := MergeConfig(persist.DefaultConfig(), []byte(`{"desc":"`+strings.Repeat("d", persist.MaxDescBytes+1)+`"}`)); persist.CodeOf(err) != persist.CodeTooLarge {
		t.Fatalf("a desc over MaxDescBytes: %v, want too-large", err)
	}
	dir := t.TempDir()
	sq := NewSQLite(SQLiteConfig{Dir: dir})
	st, err := sq.Open("hub", "legacy", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := persist.DefaultConfig()
	c.Desc = strings.Repeat("d", 1<<20) // as an older version stored it
	if _, _, err := st.SetConfig(c, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = sq.Open("hub", "legacy", time.Now()); err != nil {
		t.Fatalf("reopen with a long stored desc: %v", err)
	}
	defer st.Close()
	if got := len(st.Config().Desc); got != 1<<20 {
		t.Fatalf("stored desc read back as %d bytes", got)
	}
	next, err := MergeConfig(st.Config(), []byte(`{"max_msgs":5}`))
	if err != nil || next.MaxMsgs != 5 {
		t.Fatalf("a patch that leaves desc alone: %+v, %v", next.MaxMsgs, err)
	}
	if next, err = MergeConfig(next, []byte(`{"desc":""}`)); err != nil || next.Desc != "" {
		t.Fatalf("reset desc: %q, %v", next.Desc, err)
	}
}
