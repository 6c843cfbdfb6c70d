package search

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-dev/switchyard/usenet"
)

// Change is one event of the releases stream.
type Change struct {
	// Seq is the stream seq of the message (Delete false) or of the message
	// that is gone (Delete true).
	Seq uint64
	// Delete says the message at Seq left the stream. It removes the
	// release only while Seq is still the release's latest message: the
	// delete of a row its key replaced changes nothing.
	Delete bool
	// Release is the message's value (Delete false). A release that is not
	// Visible is removed from the index.
	Release usenet.Release
}

// Batch is changes applied in one transaction, in order.
type Batch struct {
	Changes []Change
	// LastSeq is the stream position the batch brings the index to: it is
	// stored with the rows, in the same transaction, and following resumes
	// after it. Zero (or a value not above LastSeq) keeps the stored one.
	LastSeq uint64
}

// Apply applies b in one transaction. Of the messages of one release the
// one with the highest Version is kept; a lower version that arrives later
// changes nothing but the seq the release is known by (it is now the key's
// latest message, whose delete removes the release).
func (ix *Index) Apply(ctx context.Context, b Batch) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("search: apply: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	a := applier{ctx: ctx, tx: tx}
	if err := a.prepare(); err != nil {
		return fmt.Errorf("search: apply: %w", err)
	}
	defer a.close()
	count, _, err := getMeta(ctx, tx, metaCount)
	if err != nil {
		return fmt.Errorf("search: apply: %w", err)
	}
	for _, c := range b.Changes {
		var d int64
		if c.Delete {
			d, err = a.deleteSeq(c.Seq)
		} else {
			d, err = a.set(c.Seq, c.Release)
		}
		if err != nil {
			return fmt.Errorf("search: apply seq %d: %w", c.Seq, err)
		}
		count += d
	}
	if err := setMeta(ctx, tx, metaCount, count); err != nil {
		return fmt.Errorf("search: apply: %w", err)
	}
	last := ix.lastSeq.Load()
	if b.LastSeq > last {
		last = b.LastSeq
		if err := setMeta(ctx, tx, metaLastSeq, int64(last)); err != nil {
			return fmt.Errorf("search: apply: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("search: apply: commit: %w", err)
	}
	ix.lastSeq.Store(last)
	ix.notify()
	return nil
}

// applier holds one transaction's prepared statements.
type applier struct {
	ctx context.Context
	tx  *sql.Tx

	byID, byKey, byKeyRow, group, bySeq, setSeq, insRel, delRel, insFTS, delFTS *sql.Stmt
}

func (a *applier) prepare() error {
	for _, p := range []struct {
		s *(*sql.Stmt)
		q string
	}{
		{&a.byID, `SELECT rk, seq, version FROM rel WHERE id = ?`},
		{&a.byKey, `SELECT id FROM rel WHERE rk = ?`},
		{&a.byKeyRow, `SELECT id, seq, version, data FROM rel WHERE rk = ?`},
		{&a.group, `SELECT rk, id FROM rel WHERE rk BETWEEN ? AND ?`},
		{&a.bySeq, `SELECT rk FROM rel WHERE seq = ?`},
		{&a.setSeq, `UPDATE rel SET seq = ? WHERE rk = ?`},
		{&a.insRel, `INSERT INTO rel(rk, id, seq, version, size, data) VALUES(?, ?, ?, ?, ?, ?)`},
		{&a.delRel, `DELETE FROM rel WHERE rk = ?`},
		{&a.insFTS, `INSERT INTO fts(rowid, name, tags) VALUES(?, ?, ?)`},
		{&a.delFTS, `DELETE FROM fts WHERE rowid = ?`},
	} {
		st, err := a.tx.PrepareContext(a.ctx, p.q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.q, err)
		}
		*p.s = st
	}
	return nil
}

func (a *applier) close() {
	for _, st := range []*sql.Stmt{a.byID, a.byKey, a.byKeyRow, a.group, a.bySeq, a.setSeq, a.insRel, a.delRel, a.insFTS, a.delFTS} {
		if st != nil {
			_ = st.Close()
		}
	}
}

// set applies a release message; it returns the change in row count.
func (a *applier) set(seq uint64, r usenet.Release) (int64, error) {
	if r.ID == "" {
		return 0, errors.New("release without an ID")
	}
	var rk, oldSeq, oldVersion int64
	err := a.byID.QueryRowContext(a.ctx, r.ID).Scan(&rk, &oldSeq, &oldVersion)
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	if exists && r.Version < oldVersion {
		_, err := a.setSeq.ExecContext(a.ctx, int64(seq), rk)
		return 0, err
	}
	var d int64
	if exists {
		if err := a.remove(rk); err != nil {
			return 0, err
		}
		d--
	}
	if !r.Visible {
		return d, nil
	}
	data, err := json.Marshal(r)
	if err != nil {
		return 0, fmt.Errorf("encode release %s: %w", r.ID, err)
	}
	row := keyedRow{id: r.ID, seq: int64(seq), version: r.Version, size: r.Size, data: data, name: fold(r.Name), tags: tags(r)}
	if err := a.place(r.Date, row); err != nil {
		return 0, err
	}
	return d + 1, nil
}

// keyedRow is a release's row in rel and fts, but for its key.
type keyedRow struct {
	id      string
	seq     int64
	version int64
	size    int64 // the release's bytes, which Query.MinSize and MaxSize compare
	data    []byte
	// name and tags are the fts columns: the release name folded (see
	// fold; data keeps it as it is) and its tags.
	name, tags string
}

func (a *applier) insert(rk int64, row keyedRow) error {
	if _, err := a.insRel.ExecContext(a.ctx, rk, row.id, row.seq, row.version, row.size, row.data); err != nil {
		return err
	}
	_, err := a.insFTS.ExecContext(a.ctx, rk, row.name, row.tags)
	return err
}

// place inserts row, of a release dated date, at its key: the first free
// slot of its group (see groupKey) when the group's rows all have lower
// IDs, else its rank in ID order, the group's rows being inserted again in
// that order (rare: two hex IDs that share their first idDigits digits and
// their second). A full group (more such releases than it has slots: never
// with hex IDs) leaves the release the next free slot of its second below
// the group, out of ID order.
func (a *applier) place(date int64, row keyedRow) error {
	hi := groupKey(date, row.id)
	lo := hi - (1<<rankBits - 1)
	rows, err := a.group.QueryContext(a.ctx, lo, hi)
	if err != nil {
		return err
	}
	var held []int64 // the group's keys
	after := false   // one of them has a higher ID than row
	lowest := hi + 1
	for rows.Next() {
		var rk int64
		var id string
		if err := rows.Scan(&rk, &id); err != nil {
			rows.Close()
			return err
		}
		held = append(held, rk)
		after = after || id > row.id
		lowest = min(lowest, rk)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	switch {
	case !after && lowest > lo:
		return a.insert(lowest-1, row)
	case len(held) < 1<<rankBits:
		return a.rankGroup(held, hi, row)
	}
	base := dateBase(date)
	for i := range int64(keySlot + 1) {
		rk := base | (lo-base-1-i)&keySlot
		var id string
		err := a.byKey.QueryRowContext(a.ctx, rk).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return a.insert(rk, row)
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("no free key for release %s: %d releases dated %d", row.id, keySlot+1, date)
}

// rankGroup inserts row and the rows at keys held again, in ID order, at
// the keys from hi down.
func (a *applier) rankGroup(held []int64, hi int64, row keyedRow) error {
	all := []keyedRow{row}
	for _, rk := range held {
		var o keyedRow
		if err := a.byKeyRow.QueryRowContext(a.ctx, rk).Scan(&o.id, &o.seq, &o.version, &o.data); err != nil {
			return err
		}
		var r usenet.Release
		if err := json.Unmarshal(o.data, &r); err != nil {
			return fmt.Errorf("decode release %s: %w", o.id, err)
		}
		o.size, o.name, o.tags = r.Size, fold(r.Name), tags(r)
		if err := a.remove(rk); err != nil {
			return err
		}
		all = append(all, o)
	}
	slices.SortFunc(all, func(x, y keyedRow) int { return strings.Compare(x.id, y.id) })
	for i, o := range all {
		if err := a.insert(hi-int64(i), o); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) remove(rk int64) error {
	if _, err := a.delRel.ExecContext(a.ctx, rk); err != nil {
		return err
	}
	_, err := a.delFTS.ExecContext(a.ctx, rk)
	return err
}

// deleteSeq removes the release whose latest message is seq, if any.
func (a *applier) deleteSeq(seq uint64) (int64, error) {
	var rk int64
	err := a.bySeq.QueryRowContext(a.ctx, int64(seq)).Scan(&rk)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return -1, a.remove(rk)
}

// removeMissing removes, in one transaction, the releases whose ID is not
// in held.
func (ix *Index) removeMissing(ctx context.Context, held map[string]struct{}) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("search: reconcile: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, `SELECT rk, id FROM rel`)
	if err != nil {
		return fmt.Errorf("search: reconcile: %w", err)
	}
	var gone []int64
	for rows.Next() {
		var rk int64
		var id string
		if err := rows.Scan(&rk, &id); err != nil {
			rows.Close()
			return fmt.Errorf("search: reconcile: %w", err)
		}
		if _, ok := held[id]; !ok {
			gone = append(gone, rk)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("search: reconcile: %w", err)
	}
	if len(gone) == 0 {
		return nil
	}
	a := applier{ctx: ctx, tx: tx}
	if err := a.prepare(); err != nil {
		return fmt.Errorf("search: reconcile: %w", err)
	}
	defer a.close()
	for _, rk := range gone {
		if err := a.remove(rk); err != nil {
			return fmt.Errorf("search: reconcile: %w", err)
		}
	}
	count, _, err := getMeta(ctx, tx, metaCount)
	if err != nil {
		return fmt.Errorf("search: reconcile: %w", err)
	}
	if err := setMeta(ctx, tx, metaCount, count-int64(len(gone))); err != nil {
		return fmt.Errorf("search: reconcile: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("search: reconcile: commit: %w", err)
	}
	ix.notify()
	return nil
}
