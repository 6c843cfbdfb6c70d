package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// TestPackSameAsFiles is the pack's proof: the same random history of
// writes (plain, keyed, compare-and-set, msgIDs, TTLs), deletes (with and
// without ids), config changes (limits of both discard policies, max age,
// rates), expiry on a clock that jumps, reads of every kind, closes and
// reopens, played on streams that each have a file and on streams that
// share packs, gives the same answers, the same changes and the same
// errors on both. Streams of a pack are interleaved, so one stream's
// statements run between another's.
func TestPackSameAsFiles(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			playBoth(t, seed, 600)
		})
	}
}

// playBoth plays steps random steps on 5 streams in each storage and
// compares every outcome.
func playBoth(t *testing.T, seed uint64, steps int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	files := NewSQLite(SQLiteConfig{Dir: t.TempDir(), Exclusive: true})
	packs := NewSQLite(SQLiteConfig{Dir: t.TempDir(), Packs: 2})
	t.Cleanup(func() { files.Close(); packs.Close() })
	now := time.UnixMilli(1_700_000_000_000)
	names := []string{"a", "b", "c", "d", "e"}
	type pair struct{ f, p Stream }
	open := map[string]*pair{}
	get := func(name string) *pair {
		if pr := open[name]; pr != nil {
			return pr
		}
		f, ferr := files.Open("hub", name, now)
		p, perr := packs.Open("hub", name, now)
		if ferr != nil || perr != nil {
			t.Fatalf("open %s: file %v, pack %v", name, ferr, perr)
		}
		if _, ok := p.(*packStream); !ok {
			t.Fatalf("open %s in a storage with packs: %T, want a stream of a pack", name, p)
		}
		same(t, "opened changes of "+name, f.OpenedChanges(), p.OpenedChanges())
		open[name] = &pair{f, p}
		return open[name]
	}
	keys := []string{"k1", "k2", "k3", "dir/x", ""}
	for step := range steps {
		name := names[rng.IntN(len(names))]
		pr := get(name)
		what := fmt.Sprintf("step %d on %s", step, name)
		switch r := rng.IntN(100); {
		case r < 45:
			var ops []WriteOp
			for range 1 + rng.IntN(5) {
				op := WriteOp{Key: keys[rng.IntN(len(keys))], Value: fmt.Appendf(nil, "v%d", rng.IntN(1000))}
				if rng.IntN(5) == 0 {
					op.MsgID = fmt.Sprintf("m%d", rng.IntN(8))
				}
				if op.Key != "" && rng.IntN(6) == 0 {
					prev := uint64(rng.IntN(int(step/2 + 1)))
					op.PrevSeq = &prev
				}
				if rng.IntN(6) == 0 {
					op.TTL = int64(1000 + rng.IntN(10_000))
				}
				if rng.IntN(10) == 0 {
					op.Headers = map[string]string{"h": "x"}
				}
				ops = append(ops, op)
			}
			fr, fc, ferr := pr.f.Write(ops, now)
			prs, pc, perr := pr.p.Write(ops, now)
			sameErr(t, what+" write", ferr, perr)
			same(t, what+" write results", fr, prs)
			same(t, what+" write changes", fc, pc)
		case r < 55:
			var d persist.Delete
			switch rng.IntN(4) {
			case 0:
				d.All = rng.IntN(4) == 0
				if !d.All {
					d.UpTo = uint64(rng.IntN(step + 1))
				}
			default:
				for range 1 + rng.IntN(3) {
					d.Seqs = append(d.Seqs, uint64(1+rng.IntN(step+1)))
				}
			}
			d.MsgID = fmt.Sprintf("d%d", rng.IntN(10))
			fr, fc, ferr := pr.f.Delete(d, now)
			prs, pc, perr := pr.p.Delete(d, now)
			sameErr(t, what+" delete", ferr, perr)
			same(t, what+" delete result", fr, prs)
			same(t, what+" delete changes", fc, pc)
		case r < 60:
			c := persist.DefaultConfig()
			switch rng.IntN(6) {
			case 0:
				c.MaxMsgs = int64(2 + rng.IntN(5))
			case 1:
				c.MaxMsgs, c.DiscardPolicy = int64(2+rng.IntN(5)), persist.DiscardNew
			case 2:
				c.MaxAge = time.Duration(1+rng.IntN(20)) * time.Second
			case 3:
				c.AllowMsgTTL = true
			case 4:
				c.MaxBytes, c.MaxMsgSize = int64(20+rng.IntN(40)), 8
			case 5:
				c.MaxMsgsPerSecond, c.Sync = 3, true
			}
			fcfg, fc, ferr := pr.f.SetConfig(c, now)
			pcfg, pc, perr := pr.p.SetConfig(c, now)
			sameErr(t, what+" config", ferr, perr)
			same(t, what+" config", fcfg, pcfg)
			same(t, what+" config changes", fc, pc)
		case r < 70:
			now = now.Add(time.Duration(rng.IntN(8000)) * time.Millisecond)
			fc, ferr := pr.f.Expire(now)
			pc, perr := pr.p.Expire(now)
			sameErr(t, what+" expire", ferr, perr)
			same(t, what+" expire changes", fc, pc)
		case r < 75:
			sameErr(t, what+" close", pr.f.Close(), pr.p.Close())
			delete(open, name)
		default:
			seq := uint64(rng.IntN(step + 2))
			fm, ferr := pr.f.Get(seq)
			pm, perr := pr.p.Get(seq)
			sameErr(t, what+" get", ferr, perr)
			same(t, what+" get", fm, pm)
			key := keys[rng.IntN(len(keys)-1)]
			fm, ferr = pr.f.GetKey(key)
			pm, perr = pr.p.GetKey(key)
			sameErr(t, what+" get key", ferr, perr)
			same(t, what+" get key", fm, pm)
			var fa, pa []*persist.Frame
			start, limit := uint64(rng.IntN(step+1)), rng.IntN(4)
			fn, ferr := pr.f.GetAll(start, 0, limit, func(m *persist.Frame) error { fa = append(fa, m); return nil })
			pn, perr := pr.p.GetAll(start, 0, limit, func(m *persist.Frame) error { pa = append(pa, m); return nil })
			sameErr(t, what+" get all", ferr, perr)
			same(t, what+" get all", fa, pa)
			same(t, what+" get all next", fn, pn)
			fk, ferr := pr.f.Keys(0)
			pk, perr := pr.p.Keys(0)
			sameErr(t, what+" keys", ferr, perr)
			same(t, what+" keys", fk, pk)
			fi, ferr := pr.f.Inventory()
			pi, perr := pr.p.Inventory()
			sameErr(t, what+" inventory", ferr, perr)
			same(t, what+" inventory", fi, pi)
			same(t, what+" bytes", pr.f.Bytes(), pr.p.Bytes())
			same(t, what+" needs expiry", pr.f.NeedsExpiry(), pr.p.NeedsExpiry())
		}
		if t.Failed() {
			return
		}
	}
	for _, pr := range open {
		pr.f.Close()
		pr.p.Close()
	}
}

func same(t *testing.T, what string, f, p any) {
	t.Helper()
	if reflect.DeepEqual(f, p) {
		return
	}
	fj, _ := json.Marshal(f)
	pj, _ := json.Marshal(p)
	if string(fj) != string(pj) {
		t.Fatalf("%s: file %s, pack %s", what, fj, pj)
	}
}

func sameErr(t *testing.T, what string, f, p error) {
	t.Helper()
	if (f == nil) != (p == nil) || (f != nil && persist.CodeOf(f) != persist.CodeOf(p)) {
		t.Fatalf("%s: file %v, pack %v", what, f, p)
	}
}

// TestPackStreamsLifecycle: a storage with packs makes no file per
// stream; its streams survive a close of the storage (a restart); a
// removed stream is gone from OpenExisting and the Lister's counts, and a
// stream made again under its name starts empty; a directory's pack count
// cannot change; a storage started without Packs still finds the streams
// of the packs.
func TestPackStreamsLifecycle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	st := NewSQLite(SQLiteConfig{Dir: dir, Packs: 4})
	for i := range 20 {
		s, err := st.Open(fmt.Sprintf("s%d", i%7), fmt.Sprintf("n%d", i), now)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Write([]WriteOp{{Key: "k", Value: fmt.Appendf(nil, "v%d", i)}}, now); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(p)) != packDirName && filepath.Base(p) != ".reserve" {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Fatalf("files outside the packs: %v", files)
	}
	other := NewSQLite(SQLiteConfig{Dir: dir, Packs: 8})
	if _, err := other.Open("s0", "n0", now); err == nil || persist.CodeOf(err) != persist.CodeBadRequest {
		t.Fatalf("open with another pack count: %v, want bad-request", err)
	}
	if _, err := other.PackCount(); err == nil {
		t.Fatal("PackCount with another pack count: no error")
	}
	other.Close()

	st = NewSQLite(SQLiteConfig{Dir: dir}) // no Packs: still read from them
	t.Cleanup(func() { st.Close() })
	s, err := st.OpenExisting("s3", "n10", now)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetKey("k")
	if err != nil || string(m.Value) != "v10" {
		t.Fatalf("after a restart: %v %v, want v10", m, err)
	}
	s.Close()
	n := 0
	var scopes []string
	if err := st.Scopes(t.Context(), func(sc string) error {
		scopes = append(scopes, sc)
		c, err := st.ScanScope(sc, nil)
		n += c
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != 20 || len(scopes) != 7 {
		t.Fatalf("the Lister counted %d streams in scopes %v, want 20 in 7", n, scopes)
	}
	if err := st.Remove("s3", "n10"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.OpenExisting("s3", "n10", now); !errors.Is(err, ErrNoStream) {
		t.Fatalf("open a removed stream: %v, want ErrNoStream", err)
	}
	if ok, err := st.HasStream("s3", "n10"); ok || err != nil {
		t.Fatalf("HasStream after remove: %v %v", ok, err)
	}
	if c, err := st.ScanScope("s3", nil); c != 2 || err != nil {
		t.Fatalf("scope s3 after remove: %d %v, want 2", c, err)
	}
	// A stream made again after a remove does not see the old rows.
	// (The packs are one storage's at a time: the first gives them up.)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = NewSQLite(SQLiteConfig{Dir: dir, Packs: 4})
	s, err = st.Open("s3", "n10", now)
	if err != nil {
		t.Fatal(err)
	}
	if inv, err := s.Inventory(); err != nil || inv.Count != 0 || inv.Seq != 0 {
		t.Fatalf("a stream made again: %+v %v, want empty", inv, err)
	}
}

// TestPackSharedByStoragesOfAProcess: two storages of one process on one
// directory (the servers of `up --servers N`) share its packs, whose files
// are one connection's: a stream written through one reads the same
// through the other while both are open, and the packs close with the
// last of them. (Was: the second storage's open of a pack waited for the
// first's exclusive lock and failed unavailable.)
func TestPackSharedByStoragesOfAProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	a := NewSQLite(SQLiteConfig{Dir: dir, Packs: 2})
	b := NewSQLite(SQLiteConfig{Dir: dir, Packs: 2})
	sa, err := a.Open("hub", "log", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sa.Write([]WriteOp{{Key: "k", Value: []byte("v")}}, now); err != nil {
		t.Fatal(err)
	}
	sa.Close()
	sb, err := b.OpenExisting("hub", "log", now)
	if err != nil {
		t.Fatalf("the second storage: %v", err)
	}
	if m, err := sb.GetKey("k"); err != nil || string(m.Value) != "v" {
		t.Fatalf("read through the second storage: %v %v", m, err)
	}
	sb.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// b still holds the packs: they stay open for it.
	if sb, err = b.OpenExisting("hub", "log", now); err != nil {
		t.Fatalf("after the first storage closed: %v", err)
	}
	sb.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	packSets.Lock()
	_, held := packSets.m[abs]
	packSets.Unlock()
	if held {
		t.Fatal("the packs of the directory are still held after both storages closed")
	}
}

// TestPackKeepsTotals: a large stream of a pack keeps its totals in the
// pack at close (meta 'totals' under its id), the next open takes them
// instead of counting its rows, and its first write transaction drops
// them (a write the close did not see), while another stream's delete
// leaves them. (Was: a stream of a pack counted
// its rows at every open: 18.6 ms for 100,000 rows, 10x a file's open.)
func TestPackKeepsTotals(t *testing.T) {
	t.Parallel()
	st := NewSQLite(SQLiteConfig{Dir: t.TempDir(), Packs: 1})
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	open := func(name string) *packStream {
		t.Helper()
		s, err := st.Open("hub", name, now)
		if err != nil {
			t.Fatal(err)
		}
		return s.(*packStream)
	}
	kept := func(ps *packStream) bool {
		t.Helper()
		pk := ps.s.pk
		pk.mu.Lock()
		defer pk.mu.Unlock()
		var n int
		if err := pk.conn.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM meta WHERE sid = ? AND k = 'totals'`, ps.s.sid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	big, other := open("big"), open("other")
	for b := range 5 {
		var ops []WriteOp
		for i := range 1000 {
			ops = append(ops, WriteOp{Value: fmt.Appendf(nil, "v%d-%d", b, i)})
		}
		if _, _, err := big.Write(ops, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := other.Write([]WriteOp{{Value: []byte("x")}}, now); err != nil {
		t.Fatal(err)
	}
	if err := big.Close(); err != nil {
		t.Fatal(err)
	}
	if !kept(big) {
		t.Fatal("a 5,000-row stream of a pack kept no totals at close")
	}
	big = open("big")
	if big.s.kept == (totals{}) || big.s.count != 5000 {
		t.Fatalf("reopened: count %d, kept %+v; want 5000 taken from the kept totals", big.s.count, big.s.kept)
	}
	// Another stream's delete leaves them; the stream's own drops them.
	if _, _, err := other.Delete(persist.Delete{All: true}, now); err != nil {
		t.Fatal(err)
	}
	if !kept(big) {
		t.Fatal("another stream's delete dropped the kept totals")
	}
	if _, _, err := big.Delete(persist.Delete{Seqs: []uint64{7}}, now); err != nil {
		t.Fatal(err)
	}
	if kept(big) {
		t.Fatal("the stream's own delete left its kept totals")
	}
	if err := big.Close(); err != nil {
		t.Fatal(err)
	}
	big = open("big")
	if inv, err := big.Inventory(); err != nil || inv.Count != 4999 {
		t.Fatalf("after a delete and a close: %+v %v, want 4,999", inv, err)
	}
	big.Close()
	other.Close()
}

// TestPackKeptTotalsSurviveNoStaleHandle: a stream of a pack with kept
// totals must never reopen with figures its rows do not have. (Was: a
// write that rolled back put the dropped totals row back while the handle
// forgot it had them, so no later write dropped it again; and a handle
// evicted and closing while its stream was opened again kept its own,
// older, figures over the new handle's deletes.)
func TestPackKeptTotalsSurviveNoStaleHandle(t *testing.T) {
	t.Parallel()
	st := NewSQLite(SQLiteConfig{Dir: t.TempDir(), Packs: 1})
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	open := func() *packStream {
		t.Helper()
		s, err := st.Open("hub", "big", now)
		if err != nil {
			t.Fatal(err)
		}
		return s.(*packStream)
	}
	count := func() int64 {
		t.Helper()
		s := open()
		defer s.Close()
		inv, err := s.Inventory()
		if err != nil {
			t.Fatal(err)
		}
		return inv.Count
	}
	s := open()
	for b := range 5 {
		var ops []WriteOp
		for i := range 1000 {
			ops = append(ops, WriteOp{Value: fmt.Appendf(nil, "v%d-%d", b, i)})
		}
		if _, _, err := s.Write(ops, now); err != nil {
			t.Fatal(err)
		}
	}
	s.Close() // keeps 5,000

	// A transaction that rolls back keeps the handle's duty to drop them.
	s = open()
	unlock := s.lock()
	tx, err := s.s.begin()
	if err != nil {
		t.Fatal(err)
	}
	s.s.rollback(tx)
	unlock()
	if s.s.kept == (totals{}) {
		t.Fatal("after a rollback the handle forgot the kept totals the rollback put back")
	}
	var seqs []uint64
	for q := range uint64(1000) {
		seqs = append(seqs, q+1)
	}
	if _, _, err := s.Delete(persist.Delete{Seqs: seqs}, now); err != nil {
		t.Fatal(err)
	}
	s.Close() // 4,000 rows: under TotalsMinRows, nothing kept
	if n := count(); n != 4000 {
		t.Fatalf("after a rollback, a delete and a close: count %d, want 4,000", n)
	}

	// Two handles: the old one's close does not keep its older figures.
	s = open()
	if _, _, err := s.Write([]WriteOp{{Value: []byte("more")}}, now); err != nil {
		t.Fatal(err)
	}
	var ops []WriteOp
	for i := range 1000 {
		ops = append(ops, WriteOp{Value: fmt.Appendf(nil, "w%d", i)})
	}
	if _, _, err := s.Write(ops, now); err != nil {
		t.Fatal(err)
	}
	s.Close() // 5,001 kept
	// The old handle writes (its figures are no longer the kept ones),
	// then is "evicted": the stream is opened again while it is open.
	old := open()
	if _, _, err := old.Write([]WriteOp{{Value: []byte("last")}}, now); err != nil {
		t.Fatal(err)
	}
	cur := open()
	seqs = seqs[:0]
	for q := range uint64(1000) {
		seqs = append(seqs, 1001+q)
	}
	if _, _, err := cur.Delete(persist.Delete{Seqs: seqs}, now); err != nil {
		t.Fatal(err)
	}
	old.Close() // its figures are 5,002
	cur.Close() // 4,002: under TotalsMinRows, keeps nothing
	if n := count(); n != 4002 {
		t.Fatalf("after an old handle's close: count %d, want 4,002", n)
	}
}
