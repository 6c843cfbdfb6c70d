package search

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

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

	byID, byKey, bySeq, setSeq, insRel, delRel, insFTS, delFTS *sql.Stmt
}

func (a *applier) prepare() error {
	for _, p := range []struct {
		s *(*sql.Stmt)
		q string
	}{
		{&a.byID, `SELECT rk, seq, version FROM rel WHERE id = ?`},
		{&a.byKey, `SELECT id FROM rel WHERE rk = ?`},
		{&a.bySeq, `SELECT rk FROM rel WHERE seq = ?`},
		{&a.setSeq, `UPDATE rel SET seq = ? WHERE rk = ?`},
		{&a.insRel, `INSERT INTO rel(rk, id, seq, version, data) VALUES(?, ?, ?, ?, ?)`},
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
	for _, st := range []*sql.Stmt{a.byID, a.byKey, a.bySeq, a.setSeq, a.insRel, a.delRel, a.insFTS, a.delFTS} {
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
	rk, err = a.freeKey(r)
	if err != nil {
		return 0, err
	}
	if _, err := a.insRel.ExecContext(a.ctx, rk, r.ID, int64(seq), r.Version, data); err != nil {
		return 0, err
	}
	if _, err := a.insFTS.ExecContext(a.ctx, rk, r.Name, tags(r)); err != nil {
		return 0, err
	}
	return d + 1, nil
}

// freeKey finds r's row key: its dateKey, or the next free slot of the
// same second below it when another ID holds that one.
func (a *applier) freeKey(r usenet.Release) (int64, error) {
	want := dateKey(r.Date, r.ID)
	base := dateBase(r.Date)
	for i := range int64(keySlot + 1) {
		rk := base | (want-base-i)&keySlot
		var id string
		err := a.byKey.QueryRowContext(a.ctx, rk).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return rk, nil
		}
		if err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("no free key for release %s: %d releases dated %d", r.ID, keySlot+1, r.Date)
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
