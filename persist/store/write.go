package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// runCols is the number of bound values per row of a run.
func runCols(keyed bool) int {
	if keyed {
		return 3 // key, value, size
	}
	return 1 // value (size is its length)
}

// insertRuns are the row counts of the multi-row INSERT statements, largest
// first; a run of plain appends is cut greedily into them.
var insertRuns = [...]int{64, 16, 4}

// Write implements Stream.
func (s *sqliteStream) Write(ops []WriteOp, now time.Time) ([]WriteResult, []Change, error) {
	// On a full disk writes wait for space (see reserve.go).
	if err := s.space.admit(); err != nil {
		return nil, nil, fmt.Errorf("write: %w", err)
	}
	st, err := s.begin()
	if err != nil {
		return nil, nil, s.fail(err)
	}
	// A clock stepped back must not make times decrease along seq, nor a
	// row another connection wrote (begin reloaded its lastTime) with a
	// clock ahead of ours: age and rate queries walk seq.
	nowMs := max(now.UnixMilli(), s.lastTime)
	res, changes, err := s.write(ops, nowMs)
	if err == nil {
		err = s.commit()
	}
	if err != nil {
		s.rollback(st)
		return nil, nil, s.fail(fmt.Errorf("write: %w", err))
	}
	if s.cfg.MaxMsgsPerSecond >= 0 || s.cfg.MaxBytesPerSecond >= 0 {
		s.rates.add(nowMs, s.txRate)
	}
	return res, changes, nil
}

// write applies ops inside the open transaction. Each op goes through
// admit (dedup and every check that may refuse it), encodeValue (the stored
// form of its value), stage (its row into the table or the pending run, the
// row it replaces removed) and record (totals and msgID); then the run is
// flushed and the limits enforced.
func (s *sqliteStream) write(ops []WriteOp, nowMs int64) ([]WriteResult, []Change, error) {
	changes, err := s.expire(nowMs)
	if err != nil {
		return nil, nil, err
	}
	rate, err := s.lastSecond(nowMs)
	if err != nil {
		return nil, nil, err
	}
	before := rate
	s.txRate = rateWindow{}
	results := make([]WriteResult, len(ops))
	// One allocation for every stored message the changes point at.
	msgs := make([]persist.Frame, 0, len(ops))
	changes = slices.Grow(changes, len(ops)+1)
	// A write that failed midway may have left rows and deletes buffered.
	s.resetRun()
	s.replacedSeqs = s.replacedSeqs[:0]
	for i := range ops {
		op := &ops[i]
		a, ok, err := s.admit(op, &results[i], nowMs, rate)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		seq := s.lastSeq + 1
		enc, raw, err := encodeValue(op)
		if err != nil {
			return nil, nil, err
		}
		if changes, err = s.stage(op, a, seq, nowMs, enc, raw, changes); err != nil {
			return nil, nil, err
		}
		if err := s.record(op, seq, a.size, nowMs, &rate); err != nil {
			return nil, nil, err
		}
		results[i] = WriteResult{Seq: seq, Time: nowMs}
		msgs = append(msgs, persist.Frame{Seq: seq, Time: nowMs, Key: op.Key, Headers: op.Headers, TTL: op.TTL, Value: op.Value})
		changes = append(changes, Change{Op: ChangeSet, Msg: &msgs[len(msgs)-1]})
	}
	if err := s.flushInserts(); err != nil {
		return nil, nil, err
	}
	changes = s.fillDeferred(changes)
	more, err := s.enforce()
	if err != nil {
		return nil, nil, err
	}
	s.txRate = rateWindow{rate.msgs - before.msgs, rate.bytes - before.bytes}
	return results, append(changes, more...), nil
}

// rateWindow is what the stream stored in the last second, for the rate
// limits; the ops of a write add to it as they are stored.
type rateWindow struct {
	msgs, bytes int64
}

// rateLog is what a stream's handle committed in the last second, by
// millisecond. The rate limits count writes, and the rows of the last
// second undercount them: a keyed set deletes its key's older row, and
// max_msgs the oldest rows.
type rateLog []rateBucket

type rateBucket struct {
	ms int64
	rateWindow
}

// add records what a commit at ms stored.
func (l *rateLog) add(ms int64, w rateWindow) {
	if w.msgs == 0 {
		return
	}
	if n := len(*l); n > 0 && (*l)[n-1].ms == ms {
		(*l)[n-1].msgs += w.msgs
		(*l)[n-1].bytes += w.bytes
		return
	}
	*l = append(*l, rateBucket{ms, w})
}

// since drops what is older than the second before nowMs (as the rows'
// query does: times after nowMs-1000) and sums the rest.
func (l *rateLog) since(nowMs int64) rateWindow {
	i := 0
	for i < len(*l) && (*l)[i].ms <= nowMs-1000 {
		i++
	}
	*l = append((*l)[:0], (*l)[i:]...)
	var w rateWindow
	for _, b := range *l {
		w.msgs += b.msgs
		w.bytes += b.bytes
	}
	return w
}

// lastSecond is what the stream stored in the second before nowMs when it
// has a rate limit (else zero: nothing reads it): the larger of what this
// handle committed (its rateLog) and the rows of that second, which also
// hold what other connections to the file wrote and what came before this
// handle opened.
func (s *sqliteStream) lastSecond(nowMs int64) (rateWindow, error) {
	var w rateWindow
	if s.cfg.MaxMsgsPerSecond < 0 && s.cfg.MaxBytesPerSecond < 0 {
		s.rates = s.rates[:0]
		return w, nil
	}
	// Times never decrease along seq (see lastTime), so the rows of the
	// last second are a suffix of the table: scan back to its start
	// instead of keeping a time index every write would pay for.
	if err := s.queryRowSQL(context.Background(), `SELECT COUNT(*), COALESCE(SUM(size), 0) FROM messages WHERE seq > COALESCE((SELECT seq FROM messages WHERE time <= ? ORDER BY seq DESC LIMIT 1), 0)`, nowMs-1000).Scan(&w.msgs, &w.bytes); err != nil {
		return w, fmt.Errorf("rate: %w", err)
	}
	logged := s.rates.since(nowMs)
	w.msgs, w.bytes = max(w.msgs, logged.msgs), max(w.bytes, logged.bytes)
	return w, nil
}

// admitted is what admit learned of an op it lets through.
type admitted struct {
	headers []byte // the encoded headers; nil for none
	size    int64  // as counted against the limits (messageSize)
	// looked: the key's row was looked up (compare-and-set or discard
	// new), so a replace of it is not deferred to the run (see stage).
	looked bool
}

// admit decides whether op is stored: a msgID seen within DedupWindow is
// answered from the window (or from the file, when another connection
// wrote to it), and a refused op (TTL not allowed, bad
// headers, too large, compare-and-set, rate, stream full with discard new)
// gets its error; either way it fills *r and returns false. Only a storage
// failure is an error. When op's key is in the pending run it flushes the
// run first: the key's latest row must be in the table to be looked up or
// replaced.
func (s *sqliteStream) admit(op *WriteOp, r *WriteResult, nowMs int64, rate rateWindow) (admitted, bool, error) {
	// The decoders check keys already; the store checks again so that no
	// path into it (a future decoder, a LocalStream) stores a key the
	// naming rule refuses.
	if err := persist.ValidKey(op.Key); err != nil {
		var pe *persist.Error
		errors.As(err, &pe)
		r.Err = pe
		return admitted{}, false, nil
	}
	if op.MsgID != "" {
		e, ok := s.msgids[op.MsgID]
		ok = ok && nowMs-e.time < DedupWindow.Milliseconds()
		if !ok && nowMs < s.foreignUntil {
			// Another connection stored msgIDs this window does not
			// hold (see sqlite_shared.go): the file decides.
			var err error
			if e, ok, err = s.storedMsgID(op.MsgID, nowMs); err != nil {
				return admitted{}, false, err
			}
		}
		if ok {
			*r = WriteResult{Seq: e.seq, Time: e.time, Dup: true}
			return admitted{}, false, nil
		}
	}
	if op.TTL != 0 && !s.cfg.AllowMsgTTL {
		r.Err = persist.Errorf(persist.CodeBadRequest, "this stream does not allow per-message TTL (config allow_msg_ttl)")
		return admitted{}, false, nil
	}
	hj, err := encodeHeaders(op.Headers)
	if err != nil {
		r.Err = persist.Errorf(persist.CodeBadRequest, "%v", err)
		return admitted{}, false, nil
	}
	size := messageSize(hj, op.Value, op.Key)
	if over(size, s.cfg.MaxMsgSize) {
		r.Err = persist.Errorf(persist.CodeTooLarge, "message is %d bytes, over max_msg_size %d", size, s.cfg.MaxMsgSize)
		return admitted{}, false, nil
	}
	if over(size, s.cfg.MaxBytes) {
		r.Err = persist.Errorf(persist.CodeReject, "message is %d bytes, over the stream's max_bytes %d", size, s.cfg.MaxBytes)
		return admitted{}, false, nil
	}
	var oldSeq uint64
	var oldSize int64
	found := false
	// The lookup is needed only to decide (compare-and-set, discard new);
	// a plain keyed replace finds and removes the old row in one DELETE,
	// in stage, once every check has passed.
	if _, ok := s.runKeys[op.Key]; ok && op.Key != "" {
		// The key's latest row is still in the run: insert it before
		// looking the key up or replacing it.
		if err := s.flushInserts(); err != nil {
			return admitted{}, false, err
		}
	}
	lookup := op.Key != "" && (op.PrevSeq != nil || s.cfg.DiscardPolicy == persist.DiscardNew)
	if lookup {
		err := s.keySeq.queryRow(s.conn, op.Key).Scan(&oldSeq, &oldSize)
		switch {
		case err == nil:
			found = true
		case !errors.Is(err, sql.ErrNoRows):
			return admitted{}, false, fmt.Errorf("key lookup: %w", err)
		}
	}
	if op.PrevSeq != nil {
		if *op.PrevSeq == 0 && found {
			r.Err = persist.Errorf(persist.CodeWrongLastSequence, "key %q exists at seq %d", op.Key, oldSeq)
			return admitted{}, false, nil
		}
		if *op.PrevSeq != 0 && !found {
			r.Err = persist.Errorf(persist.CodeWrongLastSequence, "key %q does not exist, not at seq %d", op.Key, *op.PrevSeq)
			return admitted{}, false, nil
		}
		if *op.PrevSeq != 0 && oldSeq != *op.PrevSeq {
			r.Err = persist.Errorf(persist.CodeWrongLastSequence, "key %q is at seq %d, not %d", op.Key, oldSeq, *op.PrevSeq)
			return admitted{}, false, nil
		}
	}
	if s.cfg.MaxMsgsPerSecond >= 0 && rate.msgs+1 > s.cfg.MaxMsgsPerSecond {
		r.Err = persist.Errorf(persist.CodeReject, "over max_msgs_per_second %d", s.cfg.MaxMsgsPerSecond)
		return admitted{}, false, nil
	}
	if s.cfg.MaxBytesPerSecond >= 0 && rate.bytes+size > s.cfg.MaxBytesPerSecond {
		r.Err = persist.Errorf(persist.CodeReject, "over max_bytes_per_second %d", s.cfg.MaxBytesPerSecond)
		return admitted{}, false, nil
	}
	if s.cfg.DiscardPolicy == persist.DiscardNew {
		n, b := s.count+1, s.bytes+size
		if found {
			n, b = n-1, b-oldSize
		}
		if over(n, s.cfg.MaxMsgs) || over(b, s.cfg.MaxBytes) {
			r.Err = persist.Errorf(persist.CodeReject, "stream is full (max_msgs %d, max_bytes %d, discard_policy new)", s.cfg.MaxMsgs, s.cfg.MaxBytes)
			return admitted{}, false, nil
		}
	}
	return admitted{headers: hj, size: size, looked: lookup}, true, nil
}

// encodeValue returns how op's value is stored: zstd-compressed when it is
// larger than compressMin, not already content-encoded by the client, and
// smaller compressed; else raw.
func encodeValue(op *WriteOp) (enc int, raw []byte, err error) {
	enc, raw = encRaw, op.Value
	if len(raw) > compressMin && op.Headers[persist.HdrContentEncoding] == "" {
		ze, _, err := codecs()
		if err != nil {
			return 0, nil, err
		}
		if c := ze.EncodeAll(raw, make([]byte, 0, len(raw)/2)); len(c) < len(raw) {
			enc, raw = encZstd, c
		}
	}
	return enc, raw, nil
}

// stage puts op's row, seq, into the table: a plain row (no headers, no
// TTL, stored raw) joins the run inserted many rows per statement, any
// other row ends the run and is inserted alone. The row op's key held
// before is removed, now or, for a plain replace, deferred to the run's
// flush; its delete change is appended to changes, which are returned.
func (s *sqliteStream) stage(op *WriteOp, a admitted, seq uint64, nowMs int64, enc int, raw []byte, changes []Change) ([]Change, error) {
	plain := a.headers == nil && op.TTL == 0 && enc == encRaw
	switch {
	case op.Key != "" && plain && !a.looked:
		// A plain replace joins the run below; its old row is removed
		// with the rest of the run's keys in one DELETE just before the
		// run is inserted (flushInserts). Its change keeps its place
		// here and is filled in (or dropped) at the end.
		s.replaceKeys = append(s.replaceKeys, op.Key)
		s.replacedSeqs = append(s.replacedSeqs, 0)
		changes = append(changes, Change{Op: ChangeDelete})
	case op.Key != "":
		// The run holds other keys only (see admit), so this finds the
		// key's row if it has one.
		var oldSeq uint64
		var sz int64
		var hadTTL bool
		err := s.delKey.queryRow(s.conn, op.Key).Scan(&oldSeq, &sz, &hadTTL)
		switch {
		case err == nil:
			s.removed(sz, hadTTL)
			changes = append(changes, Change{Op: ChangeDelete, Seqs: []uint64{oldSeq}})
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("replace key: %w", err)
		}
	}
	if raw == nil {
		raw = []byte{}
	}
	if !plain {
		// Anything else ends the run first: the run's seqs stay consecutive.
		if err := s.flushInserts(); err != nil {
			return nil, err
		}
		var key, ttl, expires any
		if op.Key != "" {
			key = op.Key
		}
		if op.TTL > 0 {
			ttl, expires = op.TTL, nowMs+op.TTL
		}
		if _, err := s.insert.exec(s.conn, seq, key, nowMs, a.headers, enc, raw, a.size, ttl, expires); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
		return changes, nil
	}
	// A run is all keyed or all unkeyed.
	keyed := op.Key != ""
	if len(s.runVals) > 0 && s.runKeyed != keyed {
		if err := s.flushInserts(); err != nil {
			return nil, err
		}
	}
	if len(s.runVals) == 0 {
		s.runSeq, s.runTime, s.runKeyed = seq, nowMs, keyed
	}
	if keyed {
		if s.runKeys == nil {
			s.runKeys = map[string]struct{}{}
		}
		s.runKeys[op.Key] = struct{}{}
		s.runVals = append(s.runVals, op.Key, raw, a.size)
	} else {
		s.runVals = append(s.runVals, raw)
	}
	if len(s.runVals) == insertRuns[0]*runCols(keyed) {
		if err := s.flushInserts(); err != nil {
			return nil, err
		}
	}
	return changes, nil
}

// record accounts for op stored at seq: the stream's totals, the rate
// window, and its msgID, remembered in the table and the window.
func (s *sqliteStream) record(op *WriteOp, seq uint64, size, nowMs int64, rate *rateWindow) error {
	s.lastSeq, s.lastTime = seq, nowMs
	s.count++
	s.bytes += size
	if op.TTL > 0 {
		// Before or after the row's insert, the index made in the same
		// transaction holds it.
		if err := s.ensureLazy(lazyExpires); err != nil {
			return fmt.Errorf("ttl: %w", err)
		}
		s.ttlRows++
	}
	if op.MsgID != "" {
		if err := s.ensureLazy(lazyMsgIDs); err != nil {
			return fmt.Errorf("msgid: %w", err)
		}
		if _, err := s.putMsgID.exec(s.conn, op.MsgID, seq, nowMs); err != nil {
			return fmt.Errorf("msgid: %w", err)
		}
		s.msgids[op.MsgID] = dedupEntry{seq: seq, time: nowMs}
		s.dedupFIFO = append(s.dedupFIFO, dedupItem{id: op.MsgID, time: nowMs})
	}
	rate.msgs++
	rate.bytes += size
	return nil
}

// fillDeferred fills the placeholder delete changes of the deferred keyed
// deletes with the seqs they removed, in order, and drops those whose key
// had no row. Every other delete change has its seqs already.
func (s *sqliteStream) fillDeferred(changes []Change) []Change {
	if len(s.replacedSeqs) == 0 {
		return changes
	}
	// One backing array for the one-seq lists.
	seqs := make([]uint64, 0, len(s.replacedSeqs))
	out, k := changes[:0], 0
	for _, c := range changes {
		if c.Op == ChangeDelete && c.Seqs == nil {
			seq := s.replacedSeqs[k]
			k++
			if seq == 0 {
				continue
			}
			seqs = append(seqs, seq)
			c.Seqs = seqs[len(seqs)-1 : len(seqs) : len(seqs)]
		}
		out = append(out, c)
	}
	clear(changes[len(out):]) // drop references past the end
	s.replacedSeqs = s.replacedSeqs[:0]
	return out
}

// resetRun forgets the buffered plain rows and the deferred deletes.
func (s *sqliteStream) resetRun() {
	clear(s.runVals) // drop references to values
	s.runVals = s.runVals[:0]
	clear(s.runKeys)
	clear(s.execArgs)
	s.execArgs = s.execArgs[:0]
	s.replaceKeys = s.replaceKeys[:0]
}

// flushInserts removes the old rows of the deferred keyed deletes, then
// inserts the run of plain rows, cutting it greedily into the multi-row
// statements of insertRuns; fewer than the smallest run go one by one.
func (s *sqliteStream) flushInserts() error {
	defer s.resetRun()
	if err := s.deleteDeferred(); err != nil {
		return err
	}
	cols := runCols(s.runKeyed)
	vals, seq := s.runVals, s.runSeq
	for len(vals) > 0 {
		rows := len(vals) / cols
		i := 0
		for i < len(insertRuns) && insertRuns[i] > rows {
			i++
		}
		if i == len(insertRuns) {
			var key, raw, size any = nil, vals[0], nil
			if s.runKeyed {
				key, raw, size = vals[0], vals[1], vals[2]
			} else {
				size = len(raw.([]byte))
			}
			if _, err := s.insert.exec(s.conn, seq, key, s.runTime, nil, encRaw, raw, size, nil, nil); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
			vals, seq = vals[cols:], seq+1
			continue
		}
		k := insertRuns[i]
		s.execArgs = append(append(s.execArgs[:0], seq, s.runTime), vals[:k*cols]...)
		if _, err := s.insertStmt(s.runKeyed, i).exec(s.conn, s.execArgs...); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		vals, seq = vals[k*cols:], seq+uint64(k)
	}
	return nil
}

// insertStmt returns the multi-row INSERT of insertRuns[i] plain rows. It
// binds the first seq (?1), the time (?2) and runCols values per row: the
// other columns of a plain row are constants or derived, which keeps the
// per-row binding cost low. It is prepared on first use.
func (s *sqliteStream) insertStmt(keyed bool, i int) *lazyStmt {
	ki := 0
	if keyed {
		ki = 1
	}
	l := &s.insertMany[ki][i]
	if l.query != "" {
		return l
	}
	// A pack's statement (pack.go) binds the stream's id as ?1 and the
	// rest one place later; it is written in the pack's form here, which
	// packSQL leaves as it is.
	var q strings.Builder
	o, sid, sidCol := 0, "", ""
	if l.sid != nil {
		o, sid, sidCol = 1, "?1, ", "sid, "
	}
	q.WriteString(`INSERT INTO messages(` + sidCol + `seq, key, time, headers, enc, raw, size, ttl, expires) VALUES`)
	for r := range insertRuns[i] {
		if r > 0 {
			q.WriteByte(',')
		}
		if keyed {
			p := 3 + 3*r + o
			fmt.Fprintf(&q, `(%s?%d+%d, ?%d, ?%d, NULL, %d, ?%d, ?%d, NULL, NULL)`, sid, 1+o, r, p, 2+o, encRaw, p+1, p+2)
		} else {
			p := 3 + r + o
			fmt.Fprintf(&q, `(%s?%d+%d, NULL, ?%d, NULL, %d, ?%d, length(?%d), NULL, NULL)`, sid, 1+o, r, 2+o, encRaw, p, p)
		}
	}
	l.query = q.String()
	return l
}

// deleteDeferred removes the rows of replaceKeys (distinct keys: a key seen
// again flushes the run first) in DELETE ... WHERE key IN (...) statements
// of insertRuns sizes, padded with NULLs (which match nothing), one key
// alone with delKey, and records each removed seq at its key's place in
// replacedSeqs.
func (s *sqliteStream) deleteDeferred() error {
	keys := s.replaceKeys
	base := len(s.replacedSeqs) - len(keys) // replacedSeqs index of keys[0]
	for len(keys) > 0 {
		if len(keys) == 1 {
			var seq uint64
			var sz int64
			var hadTTL bool
			err := s.delKey.queryRow(s.conn, keys[0]).Scan(&seq, &sz, &hadTTL)
			switch {
			case err == nil:
				s.removed(sz, hadTTL)
				s.replacedSeqs[base] = seq
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("replace key: %w", err)
			}
			return nil
		}
		i := len(insertRuns) - 1
		for i > 0 && insertRuns[i] < len(keys) {
			i--
		}
		n := min(len(keys), insertRuns[i])
		args := s.execArgs[:0]
		for _, k := range keys[:n] {
			args = append(args, k)
		}
		for len(args) < insertRuns[i] {
			args = append(args, nil)
		}
		s.execArgs = args
		// The loop runs while the connection is held: no statement of
		// the stream may run in it.
		err := s.deleteKeysStmt(i).rows(s.conn, func(vals []driver.Value) error {
			var key string
			var seq uint64
			var sz int64
			var hadTTL bool
			for c, d := range [...]any{&key, &seq, &sz, &hadTTL} {
				if err := scanValue(d, vals[c]); err != nil {
					return err
				}
			}
			s.removed(sz, hadTTL)
			j := slices.Index(keys[:n], key)
			if j < 0 {
				return fmt.Errorf("deleted key %q was not asked for", key)
			}
			s.replacedSeqs[base+j] = seq
			return nil
		}, args...)
		if err != nil {
			return fmt.Errorf("replace keys: %w", err)
		}
		keys, base = keys[n:], base+n
	}
	return nil
}

// deleteKeysStmt returns the DELETE of up to insertRuns[i] keys, prepared on
// first use.
func (s *sqliteStream) deleteKeysStmt(i int) *lazyStmt {
	l := &s.delMany[i]
	if l.query == "" {
		l.query = `DELETE FROM messages WHERE key IN (?` + strings.Repeat(`, ?`, insertRuns[i]-1) + `) RETURNING key, seq, size, expires IS NOT NULL`
	}
	return l
}
