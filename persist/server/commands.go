// This file runs a stream's jobs on its worker: the batch loop that opens
// the stream when a job needs it, the group commit of consecutive writes, and
// each command (get, getAll, delete, drop, keys, inventory, config).

package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// serve runs jobs on h in order; consecutive writes share one transaction.
// When jobs end with writes, their answers are returned instead of sent:
// the caller sends them after handing the stream back (doneServing), so a
// client that writes again at once finds the stream idle (see enqueue).
//
// A stream is opened by the first job that needs it, inside the loop: a disk
// error can close the stream midway (dropIfStuck) and the next job reopens
// it. Reads (and the server's own expiry and backup jobs) open it only if it
// exists: on a missing stream they are answered as for an empty one and h.st
// stays nil, so no file appears and the next batch looks again (another
// server sharing the data directory may have created the stream since).
// Writes, deletes and config updates create it.
func (s *Server) serve(h *handle, jobs []*job) (later writeAnswers) {
	missing := false // this batch found the stream missing; reads need not look again
	for i := 0; i < len(jobs); {
		j := jobs[i]
		if j.checkpoint && h.st == nil {
			i++ // closed since it was queued: nothing to checkpoint
			continue
		}
		if h.st == nil {
			create := j.createsStream()
			if !create && missing {
				s.serveOne(h, missingStream(h.key), j)
				s.served(j)
				i++
				continue
			}
			// With no slot free, taking one closes another stream: a read
			// of a stream that does not exist must not, as it keeps no
			// handle either (a made-up name would push open streams out).
			// An ephemeral stream that is not open does not exist (its
			// storage's OpenExisting says so for every name): closing an
			// idle stream to look would close, for a made-up name, an
			// ephemeral stream of someone else, and its messages with it.
			if !s.tryTakeSlot() {
				if !create && (h.key.ephemeral || s.surelyMissing(h.key)) {
					missing = true
					continue
				}
				if err := s.takeSlot(); err != nil {
					s.openFailed(h, jobs[i:], err)
					return writeAnswers{}
				}
			}
			if s.cfg.ExclusiveFiles && !h.key.ephemeral {
				// Its file is locked until an earlier handle's close
				// (or compaction) is done: wait for that, not busy_timeout.
				s.mu.Lock()
				s.waitClosedLocked(h.key)
				s.mu.Unlock()
			}
			st, err := s.open(h.key, create)
			if err != nil {
				s.giveSlot()
			}
			if errors.Is(err, store.ErrNoStream) {
				missing = true
				continue
			}
			if err != nil {
				s.openFailed(h, jobs[i:], err)
				return writeAnswers{}
			}
			h.st = st
			if h.key.ephemeral {
				s.openEphemeral.Add(1)
			}
			if store.InPack(st) {
				s.openPacked.Add(1)
			}
			// What aged out while the stream was closed went at its open:
			// deletes like the timer's, reported as they are.
			if changes := st.OpenedChanges(); len(changes) > 0 {
				s.countExpired(changes)
				s.report(h, changes)
			}
			// It exists now: should a disk error close it again later in
			// this batch, the reads after that must reopen it, not answer
			// as for the missing stream.
			missing = false
		}
		if j.req == nil || !j.req.isWrite() {
			s.serveOne(h, h.st, j)
			s.served(j)
			i++
			continue
		}
		n, end := 0, i
		for end < len(jobs) && jobs[end].req != nil && jobs[end].req.isWrite() && (end == i || n+len(jobs[end].req.ops) <= s.cfg.MaxCommitOps) {
			n += len(jobs[end].req.ops)
			end++
		}
		ans := s.writeBatch(h, jobs[i:end], n)
		if end == len(jobs) {
			return ans
		}
		s.answerWrites(ans)
		i = end
	}
	return writeAnswers{}
}

// writeAnswers are the answers of one group commit, not sent yet.
type writeAnswers struct {
	jobs    []*job
	results []store.WriteResult // nil when the commit failed
	err     error               // the commit's error
}

// answerWrites answers each job of a group commit.
func (s *Server) answerWrites(a writeAnswers) {
	if a.err != nil {
		for _, j := range a.jobs {
			s.replyError(j.msg, a.err)
			s.served(j)
		}
		return
	}
	results := a.results
	for _, j := range a.jobs {
		k := len(j.req.ops)
		res := results[:k]
		results = results[k:]
		if j.req.cmd == persist.CmdSet {
			s.replySet(j.msg, res[0])
		} else {
			s.replySetMany(j.msg, res)
		}
		s.served(j)
	}
}

// openFailed answers jobs with the error of opening h's stream.
func (s *Server) openFailed(h *handle, jobs []*job, err error) {
	if _, disk := store.IsDiskError(err); disk {
		s.log.Warn("persist: open stream", "scope", h.key.scope, "stream", h.key.name, "err", err)
	} else if persist.CodeOf(err) == persist.CodeInternal {
		s.log.Error("persist: open stream", "scope", h.key.scope, "stream", h.key.name, "err", err)
	}
	err = storageError(err)
	for _, j := range jobs {
		if j.msg != nil {
			s.replyError(j.msg, err)
		}
	}
	s.clearExpirePending(h, jobs)
	s.clearArchivePending(h, jobs)
}

// open opens the stream of k, creating it only when create is set.
// The open is counted (countOpen): it may make the stream's file.
func (s *Server) open(k handleKey, create bool) (store.Stream, error) {
	return s.countOpen(k, func() (store.Stream, error) {
		if create {
			return s.storage(k).Open(k.scope, k.name, time.Now())
		}
		return s.storage(k).OpenExisting(k.scope, k.name, time.Now())
	})
}

// storage is where the stream of k is kept: the request's Sy-Ephemeral
// picks Memory or Storage.
func (s *Server) storage(k handleKey) store.Storage {
	if k.ephemeral {
		return s.cfg.Memory
	}
	return s.cfg.Storage
}

// missingStream serves reads of the stream of k when it does not exist, as
// a new stream of its storage would: the default configuration, clamped
// for an ephemeral one.
func missingStream(k handleKey) store.Stream {
	c := persist.DefaultConfig()
	if k.ephemeral {
		c = store.ClampEphemeral(c)
	}
	return store.Missing(c)
}

// createsStream reports whether j may create its stream: writes, deletes
// (a delete records its id, so that a retry answers what it did) and config
// updates. Reads, drops (which would only remove what they made) and the
// server's own jobs never do.
func (j *job) createsStream() bool {
	if j.req == nil {
		return false
	}
	switch j.req.cmd {
	case persist.CmdSet, persist.CmdSetMany:
		return true
	case persist.CmdDelete:
		return !j.req.drop
	case persist.CmdConfig:
		return j.req.configPatch != nil
	}
	return false
}

func (s *Server) clearExpirePending(h *handle, jobs []*job) {
	for _, j := range jobs {
		if j.expire {
			s.mu.Lock()
			h.expirePending = false
			s.mu.Unlock()
			return
		}
	}
}

// writeBatch commits the writes of jobs in one transaction, publishes its
// changes and returns the answers to send.
func (s *Server) writeBatch(h *handle, jobs []*job, n int) writeAnswers {
	var ops []store.WriteOp
	if len(jobs) == 1 {
		ops = jobs[0].req.ops
	} else {
		ops = make([]store.WriteOp, 0, n)
		for _, j := range jobs {
			ops = append(ops, j.req.ops...)
		}
	}
	if s.beforeWrite != nil {
		s.beforeWrite(len(ops))
	}
	t0 := time.Now()
	results, changes, err := h.st.Write(ops, t0)
	if err != nil {
		s.commitFails.Add(1)
		s.writeFailure.Store(&writeFailure{at: t0, err: err})
		if _, disk := store.IsDiskError(err); disk {
			// Expected while the disk is full or read-only: every refused
			// write logs, so not at error level.
			s.log.Warn("persist: write", "scope", h.key.scope, "stream", h.key.name, "err", err)
		} else {
			s.log.Error("persist: write", "scope", h.key.scope, "stream", h.key.name, "err", err)
		}
		s.dropIfStuck(h, err)
		return writeAnswers{jobs: jobs, err: storageError(err)}
	}
	took := time.Since(t0)
	if o := s.cfg.Observer; o != nil {
		o.Committed(len(ops), took)
	}
	h.commitTook = took
	h.peakOps = decayPeak(h.peakOps, len(ops))
	s.commits.Add(1)
	if s.writeFailure.Load() != nil {
		s.writeFailure.Store(nil)
	}
	s.countDedup(results)
	s.report(h, changes)
	return writeAnswers{jobs: jobs, results: results}
}

func (s *Server) report(h *handle, changes []store.Change) {
	if len(changes) > 0 && s.cfg.OnChange != nil {
		s.cfg.OnChange(h.key.scope, h.key.name, h.key.ephemeral, changes)
	}
}

// serveOne runs one non-write job on st: h.st, or store.Missing for a read
// of a stream that does not exist.
func (s *Server) serveOne(h *handle, st store.Stream, j *job) {
	if j.archive {
		s.runArchive(h, st)
		return
	}
	if j.checkpoint {
		if ck, ok := st.(store.Checkpointer); ok {
			s.checkpoints.Add(1)
			if err := ck.Checkpoint(); err != nil {
				s.ckptFails.Add(1)
				s.log.Warn("persist: checkpoint", "scope", h.key.scope, "stream", h.key.name, "err", err)
				s.dropIfStuck(h, err)
			}
		}
		return
	}
	if j.expire {
		s.mu.Lock()
		h.expirePending = false
		s.mu.Unlock()
		changes, err := st.Expire(time.Now())
		if err != nil {
			s.log.Error("persist: expire", "scope", h.key.scope, "stream", h.key.name, "err", err)
			s.dropIfStuck(h, err)
			return
		}
		s.countExpired(changes)
		s.report(h, changes)
		return
	}
	m, r := j.msg, j.req
	switch r.cmd {
	case persist.CmdGet:
		var msg *persist.Frame
		var err error
		if r.hasSeq {
			msg, err = st.Get(r.seq)
		} else {
			msg, err = st.GetKey(r.key)
		}
		if err != nil {
			s.replyError(m, storageError(err))
			s.dropIfStuck(h, err)
			return
		}
		s.replyGet(m, msg)
	case persist.CmdGetAll:
		s.serveGetAll(h, st, m, r)
	case persist.CmdDelete:
		if r.drop {
			s.serveDrop(h, m, r)
			return
		}
		res, changes, err := st.Delete(r.del, time.Now())
		if err != nil {
			s.replyError(m, storageError(err))
			s.dropIfStuck(h, err)
			return
		}
		s.report(h, changes)
		s.replyDelete(m, res)
	case persist.CmdKeys:
		// The reply is the JSON list alone: it must fit the connection's
		// max payload, and a list past it is refused before it is built.
		keys, err := st.Keys(int(s.cfg.Conn.MaxPayload()))
		if err != nil {
			s.replyError(m, storageError(err))
			s.dropIfStuck(h, err)
			return
		}
		s.replyJSON(m, keys)
	case persist.CmdInventory:
		// Revalidated against the file: another server sharing the data
		// directory may have written since (a watcher's resync trusts it).
		inv, err := st.Inventory()
		if err != nil {
			s.replyError(m, storageError(err))
			s.dropIfStuck(h, err)
			return
		}
		s.replyJSON(m, inv)
	case persist.CmdConfig:
		// Both a read and a patch start from the config the file holds.
		if err := st.Revalidate(); err != nil {
			s.replyError(m, storageError(err))
			s.dropIfStuck(h, err)
			return
		}
		if r.configPatch == nil {
			s.replyJSON(m, st.Config())
			return
		}
		next, err := store.MergeConfig(st.Config(), r.configPatch)
		if err != nil {
			s.replyError(m, err)
			return
		}
		cfg, changes, err := st.SetConfig(next, time.Now())
		s.countExpired(changes)
		s.report(h, changes)
		if err != nil {
			s.replyError(m, storageError(err))
			s.dropIfStuck(h, err)
			return
		}
		s.replyJSON(m, cfg)
	default:
		// decodeRequest admits only known commands.
		s.replyError(m, persist.Errorf(persist.CodeInternal, "unhandled command %q", r.cmd))
	}
}

// serveDrop serves a delete with Sy-Drop: it deletes everything, as
// Sy-All does (so the change feed reports the removed seqs), then closes the
// stream and removes its files, archive copy included, so that the stream
// no longer exists. h.st is nil when the stream does not exist: then there
// is nothing to remove and the answer is that of an empty delete.
//
// It runs on the stream's worker, so no other request of the stream is
// served between the delete and the removal; requests queued behind it find
// the stream missing (reads) or create it afresh, from seq 1 (writes).
func (s *Server) serveDrop(h *handle, m *nats.Msg, r *request) {
	if h.st == nil {
		s.replyDelete(m, store.DeleteResult{Seqs: []uint64{}})
		return
	}
	res, changes, err := h.st.Delete(r.del, time.Now())
	if err != nil {
		s.replyError(m, storageError(err))
		s.dropIfStuck(h, err)
		return
	}
	s.report(h, changes)
	// Evicted handles of the stream are closed first, so that this one is
	// the file's last connection: its full close checkpoints the delete
	// into the database and removes the WAL (an evicted one may have been
	// closed quickly, leaving its WAL), and Remove then removes an emptied
	// database. Closed before its files go, and whatever Close says: the
	// delete is committed, and Remove is what decides whether the stream is
	// gone.
	s.mu.Lock()
	s.waitClosedLocked(h.key)
	s.mu.Unlock()
	if err := s.closeHandle(h); err != nil {
		s.log.Warn("persist: close stream to drop it", "scope", h.key.scope, "stream", h.key.name, "err", err)
	}
	if err := s.countRemove(h.key); err != nil {
		// The stream is left, emptied, with its delete id: a retry of the
		// same drop reopens it, answers what this one removed and removes
		// the files again.
		s.log.Warn("persist: drop stream", "scope", h.key.scope, "stream", h.key.name, "err", err)
		s.replyError(m, storageError(err))
		return
	}
	s.replyDelete(m, res)
}

// serveGetAll streams the selected messages to the reply subject in chunks
// of frames of at most ChunkBytes or the max payload (a single larger message gets a chunk of
// its own), numbered from 0; the last chunk carries Sy-Eof and, when
// Sy-Limit cut the range, Sy-Next-Seq.
func (s *Server) serveGetAll(h *handle, st store.Stream, m *nats.Msg, r *request) {
	if m.Reply == "" {
		return
	}
	chunk := 0
	var buf, frame []byte
	// A chunk stays under the connection's max payload too (less the room
	// of its headers): a NATS server set below ChunkBytes would refuse
	// every full chunk, and so every read and watch of a stream larger than
	// it. A frame larger than that is refused on write (checkAnswerRoom).
	chunkBytes := min(persist.ChunkBytes, int(s.cfg.Conn.MaxPayload())-answerRoom)
	publish := func(eof bool, next uint64) error {
		out := &nats.Msg{Subject: m.Reply, Header: nats.Header{}, Data: buf}
		out.Header.Set(persist.HdrChunk, itoa(uint64(chunk)))
		if eof {
			out.Header.Set(persist.HdrEOF, "true")
			if next > 0 {
				out.Header.Set(persist.HdrNextSeq, itoa(next))
			}
		}
		chunk++
		// PublishMsg copies the data into the connection's buffer.
		err := s.cfg.Conn.PublishMsg(out)
		buf = buf[:0]
		return err
	}
	start := max(r.start, 1)
	next, err := st.GetAll(start, r.end, r.limit, func(msg *persist.Frame) error {
		var err error
		if frame, err = persist.AppendFrame(frame[:0], msg); err != nil {
			return err
		}
		if len(buf) > 0 && len(buf)+len(frame) > chunkBytes {
			if err := publish(false, 0); err != nil {
				return fmt.Errorf("publish chunk: %w", err)
			}
		}
		buf = append(buf, frame...)
		return nil
	})
	if err == nil {
		if err = publish(true, next); err == nil {
			s.answered(m, "")
		}
	}
	if err != nil {
		s.log.Error("persist: getAll", "scope", h.key.scope, "stream", h.key.name, "err", err)
		if _, disk := store.IsDiskError(err); disk {
			// A read can meet a disk gone read-only or failing too; the
			// stream is reopened for the next request (see dropIfStuck).
			s.replyError(m, storageError(err))
			s.dropIfStuck(h, err)
			return
		}
		s.replyError(m, persist.Errorf(persist.CodeInternal, "getAll failed after %d chunks: %v", chunk, err))
	}
}
