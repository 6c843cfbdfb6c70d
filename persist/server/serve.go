package server

import (
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
func (s *Server) serve(h *handle, jobs []*job) (later writeAnswers) {
	for i := 0; i < len(jobs); {
		// Opened here, not once before the loop: a disk error can close
		// the stream midway (dropIfStuck), and the next job reopens it.
		if h.st == nil && !s.open(h, jobs[i:]) {
			return writeAnswers{}
		}
		j := jobs[i]
		if j.req == nil || !j.req.isWrite() {
			s.serveOne(h, j)
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
	}
}

// open opens h's stream; when that fails it answers jobs with the error and
// returns false.
func (s *Server) open(h *handle, jobs []*job) bool {
	st, err := s.cfg.Storage.Open(h.key.scope, h.key.name, h.key.ephemeral, time.Now())
	if err == nil {
		h.st = st
		return true
	}
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
	results, changes, err := h.st.Write(ops, time.Now())
	if err != nil {
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
	s.commits.Add(1)
	s.report(h, changes)
	return writeAnswers{jobs: jobs, results: results}
}

func (s *Server) report(h *handle, changes []store.Change) {
	if len(changes) > 0 && s.cfg.OnChange != nil {
		s.cfg.OnChange(h.key.scope, h.key.name, h.key.ephemeral, changes)
	}
}

// serveOne runs one non-write job.
func (s *Server) serveOne(h *handle, j *job) {
	if j.archive {
		s.runArchive(h)
		return
	}
	if j.expire {
		s.mu.Lock()
		h.expirePending = false
		s.mu.Unlock()
		changes, err := h.st.Expire(time.Now())
		if err != nil {
			s.log.Error("persist: expire", "scope", h.key.scope, "stream", h.key.name, "err", err)
			s.dropIfStuck(h, err)
			return
		}
		s.report(h, changes)
		return
	}
	m, r := j.msg, j.req
	switch r.cmd {
	case persist.CmdGet:
		var msg *persist.Frame
		var err error
		if r.hasSeq {
			msg, err = h.st.Get(r.seq)
		} else {
			msg, err = h.st.GetKey(r.key)
		}
		if err != nil {
			s.replyError(m, err)
			return
		}
		s.replyGet(m, msg)
	case persist.CmdGetAll:
		s.serveGetAll(h, m, r)
	case persist.CmdDelete:
		res, changes, err := h.st.Delete(r.del, time.Now())
		if err != nil {
			s.replyError(m, storageError(err))
			s.dropIfStuck(h, err)
			return
		}
		s.report(h, changes)
		s.replyDelete(m, res)
	case persist.CmdKeys:
		keys, err := h.st.Keys()
		if err != nil {
			s.replyError(m, err)
			return
		}
		s.replyJSON(m, keys)
	case persist.CmdInventory:
		s.replyJSON(m, h.st.Inventory())
	case persist.CmdConfig:
		if r.configPatch == nil {
			s.replyJSON(m, h.st.Config())
			return
		}
		next, err := store.MergeConfig(h.st.Config(), r.configPatch)
		if err != nil {
			s.replyError(m, err)
			return
		}
		cfg, changes, err := h.st.SetConfig(next, time.Now())
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

// serveGetAll streams the selected messages to the reply subject in chunks
// of frames of at most ChunkBytes (a single larger message gets a chunk of
// its own), numbered from 0; the last chunk carries Sy-Eof and, when
// Sy-Limit cut the range, Sy-Next-Seq.
func (s *Server) serveGetAll(h *handle, m *nats.Msg, r *request) {
	if m.Reply == "" {
		return
	}
	chunk := 0
	var buf, frame []byte
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
	next, err := h.st.GetAll(start, r.end, r.limit, func(msg *persist.Frame) error {
		var err error
		if frame, err = persist.AppendFrame(frame[:0], msg); err != nil {
			return err
		}
		if len(buf) > 0 && len(buf)+len(frame) > persist.ChunkBytes {
			if err := publish(false, 0); err != nil {
				return fmt.Errorf("publish chunk: %w", err)
			}
		}
		buf = append(buf, frame...)
		return nil
	})
	if err == nil {
		err = publish(true, next)
	}
	if err != nil {
		s.log.Error("persist: getAll", "scope", h.key.scope, "stream", h.key.name, "err", err)
		s.replyError(m, persist.Errorf(persist.CodeInternal, "getAll failed after %d chunks: %v", chunk, err))
	}
}
