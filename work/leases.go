package work

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// QuietAfterDefault is how long a lease that read everything must go
// without a write before FinishAbandoned finishes its range: a fixed 20 s
// (twice HeartbeatDefault), not twice a worker's configured Heartbeat,
// which the coordinator that runs FinishAbandoned does not know. A worker
// writes its lease between ReadAll and Finish without heartbeating, so
// the default need only outlast that gap.
const QuietAfterDefault = 2 * HeartbeatDefault

// ErrNoWork: no range is spooled, and no lease has expired.
var ErrNoWork = errors.New("work: no range to lease")

// LeaseConfig configures Leases.
type LeaseConfig struct {
	// TTL is how long a lease lives without a heartbeat. Zero means
	// LeaseTTLDefault.
	TTL time.Duration
	// MaxAttempts is how many leases a range gets before it is failed.
	// Every lease counts, whether it ended in Fail or expired; Release
	// gives its attempt back. Zero means MaxAttemptsDefault.
	MaxAttempts int
	// HistoryFirst leases history ranges before tail ranges. The default
	// (false) leases the tail first, so new articles are indexed soon.
	HistoryFirst bool
	// QuietAfter is how long a lease that read everything (or finished)
	// must not have been written before FinishAbandoned takes it over.
	// Zero means QuietAfterDefault (a fixed 20 s).
	QuietAfter time.Duration
	// AbandonedEvery is how often the main shard runs FinishAbandoned (the
	// coordinator's --abandoned-every). A lease that read everything lives
	// at least three of these rounds, so the round meets it even if its
	// holder dies. Zero means AbandonedEveryDefault.
	AbandonedEvery time.Duration
	// RetainDone is how long a done range's record is kept after it
	// finished; Retire (in the main shard's abandoned round) then deletes
	// it and adds it to its group's Retired counts. Zero means
	// RetainDoneDefault (24 h).
	RetainDone time.Duration
}

func (c LeaseConfig) withDefaults() LeaseConfig {
	if c.TTL == 0 {
		c.TTL = LeaseTTLDefault
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = MaxAttemptsDefault
	}
	if c.QuietAfter == 0 {
		c.QuietAfter = QuietAfterDefault
	}
	if c.AbandonedEvery == 0 {
		c.AbandonedEvery = AbandonedEveryDefault
	}
	if c.RetainDone == 0 {
		c.RetainDone = RetainDoneDefault
	}
	return c
}

// LeaseStats counts what one Leases saw.
type LeaseStats struct {
	Acquired int64 // leases taken
	Finished int64 // ranges finished by their holder
	Settled  int64 // ranges finished from a Finished or ReadAll lease by someone else (Settle, FinishAbandoned)
	Fenced   int64 // fenced calls rejected because the token was stale
	Expired  int64 // leased ranges found with their lease gone (and taken again or failed)
	Failed   int64 // calls of Fail
	Released int64 // calls of Release that gave a range back
	Swept    int64 // spools of done or failed ranges FinishAbandoned dropped
	Retired  int64 // done ranges Retire deleted after RetainDone
}

// Leases hands out spooled ranges under fenced leases: the lease entry's
// persist seq is the token every later change is a compare-and-set on.
// Its methods are safe for concurrent use, by any number of processes.
type Leases struct {
	st  *Store
	cfg LeaseConfig

	acquired, finished, settled, fenced, expired, failed, released, swept, retired atomic.Int64

	// now is the clock Retire judges a done range's age by (tests move it).
	now func() time.Time

	// sweptFrom is the unix milliseconds from which FinishAbandoned's next
	// spool sweep looks at done and failed ranges; 0 (every range) until a
	// sweep of this process has gone through without an error.
	sweptFrom atomic.Int64
}

// NewLeases returns the leases of st's source.
func NewLeases(st *Store, cfg LeaseConfig) (*Leases, error) {
	if st == nil {
		return nil, errors.New("work: leases: nil store")
	}
	cfg = cfg.withDefaults()
	if cfg.TTL < 0 || cfg.MaxAttempts < 0 || cfg.QuietAfter < 0 || cfg.AbandonedEvery < 0 || cfg.RetainDone < 0 {
		return nil, fmt.Errorf("work: leases: negative setting in %+v", cfg)
	}
	return &Leases{st: st, cfg: cfg, now: time.Now}, nil
}

// Stats returns the counters.
func (l *Leases) Stats() LeaseStats {
	return LeaseStats{
		Acquired: l.acquired.Load(),
		Finished: l.finished.Load(),
		Settled:  l.settled.Load(),
		Fenced:   l.fenced.Load(),
		Expired:  l.expired.Load(),
		Failed:   l.failed.Load(),
		Released: l.released.Load(),
		Swept:    l.swept.Load(),
		Retired:  l.retired.Load(),
	}
}

// Held is a lease a caller holds. Token changes with every renewal; the
// methods of Leases that take a Held update it, one at a time (a Held's
// fields must not be read while such a call is in flight).
type Held struct {
	Range  Range
	Token  uint64
	Holder string

	mu       sync.Mutex // serializes the fenced calls, which each move Token
	rangeSeq uint64     // the range record's seq after our last write of it
	lease    Lease      // the lease as last written under Token
}

// readAllTTL keeps a lease that read everything long enough for the main
// shard's FinishAbandoned round to meet it even if its holder dies: three
// of its rounds, so a round that fails or runs late still leaves two.
func (l *Leases) readAllTTL() time.Duration {
	return max(l.cfg.TTL, 3*l.cfg.AbandonedEvery)
}

func (l *Leases) ttlFor(le Lease) time.Duration {
	if le.ReadAll || le.Finished {
		return l.readAllTTL()
	}
	return l.cfg.TTL
}

// fenceErr turns the conflict of a compare-and-set on a lease into
// ErrFenced.
func fenceErr(what string, id uint64, err error) error {
	if errors.Is(err, ErrConflict) {
		return fmt.Errorf("work: %s range %d: %w", what, id, ErrFenced)
	}
	return fmt.Errorf("work: %s range %d: %w", what, id, err)
}

// counted counts a fenced call on its way out.
func (l *Leases) counted(err error) error {
	if errors.Is(err, ErrFenced) {
		l.fenced.Add(1)
	}
	return err
}

// rank orders candidates: tail before history unless HistoryFirst, then by
// id (lowest first).
func (l *Leases) rank(a, b Range) int {
	ka, kb := a.Kind == KindHistory, b.Kind == KindHistory
	if l.cfg.HistoryFirst {
		ka, kb = !ka, !kb
	}
	if ka != kb {
		if kb {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.ID, b.ID)
}

// Acquire leases one range for holder: a spooled range, or a leased one
// whose lease has expired (its holder died or lost touch), tail before
// history unless HistoryFirst, lowest id first. On the way it completes
// ranges whose lease says Finished. ErrNoWork when nothing is available.
func (l *Leases) Acquire(ctx context.Context, holder string) (*Held, error) {
	if holder == "" {
		return nil, errors.New("work: acquire: empty holder")
	}
	// A pass can lose every candidate to other acquirers while some of
	// them give a range back; a few passes make ErrNoWork mean "none".
	for pass := 0; pass < 3; pass++ {
		ranges, err := l.st.Ranges(ctx)
		if err != nil {
			return nil, fmt.Errorf("work: acquire: %w", err)
		}
		leases, err := l.st.Leases(ctx)
		if err != nil {
			return nil, fmt.Errorf("work: acquire: %w", err)
		}
		held := make(map[uint64]Versioned[Lease], len(leases))
		for _, le := range leases {
			held[le.Val.Range] = le
		}
		var cands []Versioned[Range]
		for _, r := range ranges {
			le, leased := held[r.Val.ID]
			switch {
			case r.Val.State == StateSpooled && !leased:
				cands = append(cands, r)
			case r.Val.State == StateLeased && !leased:
				cands = append(cands, r)
			case r.Val.State == StateLeased && le.Val.Finished:
				// The holder died between its two finishing writes.
				if _, err := l.settle(ctx, r, le); err != nil && ctx.Err() != nil {
					return nil, fmt.Errorf("work: acquire: %w", err)
				}
			}
		}
		if len(cands) == 0 {
			return nil, ErrNoWork
		}
		slices.SortFunc(cands, func(a, b Versioned[Range]) int { return l.rank(a.Val, b.Val) })
		lost := false
		for _, r := range cands {
			h, err := l.take(ctx, r, holder)
			if err == nil && h != nil {
				return h, nil
			}
			if err != nil && !errors.Is(err, ErrConflict) {
				return nil, fmt.Errorf("work: acquire: %w", err)
			}
			lost = true
		}
		if !lost {
			break
		}
	}
	return nil, ErrNoWork
}

// take tries to lease range r: first the lease entry with prev 0, which
// only one process can create, then the range's compare-and-set. nil, nil
// when the range turned out to be no longer available (or was failed for
// running out of attempts); ErrConflict when another took it first.
func (l *Leases) take(ctx context.Context, r Versioned[Range], holder string) (*Held, error) {
	le := Lease{Range: r.Val.ID, Holder: holder}
	tok, err := l.st.PutLease(ctx, le, 0, l.cfg.TTL)
	if err != nil {
		return nil, err
	}
	return l.takeLeased(ctx, r, le, tok)
}

// takeLeased is take after its lease le was created with token tok: the
// range's compare-and-set. It is apart so that tests can run it for a
// caller that stalled between the two steps.
func (l *Leases) takeLeased(ctx context.Context, r Versioned[Range], le Lease, tok uint64) (*Held, error) {
	holder := le.Holder
	// From here we own the range's lease: give it back on any way out
	// that does not hand it to the caller.
	drop := func() { _ = l.st.DropLease(context.WithoutCancel(ctx), tok) }
	for {
		expired := r.Val.State == StateLeased
		nr := r.Val
		if expired && nr.Attempts >= l.cfg.MaxAttempts {
			// Its holders kept dying on it: stop here rather than loop.
			nr.State = StateFailed
			nr.Error = fmt.Sprintf("lease expired after %d attempts", nr.Attempts)
			nr.Missed = [][2]int64{{nr.First, nr.Last}}
			nr.Result = nil
		} else {
			nr.State = StateLeased
			nr.Attempts++
			nr.Holder = holder
		}
		seq, err := l.st.PutRange(ctx, nr, r.Seq)
		if errors.Is(err, ErrConflict) {
			// Someone changed the range since we read it (a prefetcher
			// rewrote its spool, or an expired holder's last write landed):
			// read again; we still hold its only lease.
			cur, gerr := l.st.Range(ctx, r.Val.ID)
			if errors.Is(gerr, persist.ErrNotFound) {
				// Retired meanwhile: it was done, though our read said not.
				drop()
				return nil, nil
			}
			if gerr != nil {
				drop()
				return nil, fmt.Errorf("work: take range %d: %w", r.Val.ID, gerr)
			}
			if cur.Val.State != StateSpooled && cur.Val.State != StateLeased {
				drop()
				return nil, nil
			}
			// A leased range looks expired only while our lease is the
			// range's lease. If we stalled past the TTL, ours expired and
			// the write we conflicted with may be the next holder's: taking
			// (or failing) the range now would write over it.
			cle, lerr := l.st.Lease(ctx, r.Val.ID)
			if lerr != nil && !errors.Is(lerr, persist.ErrNotFound) {
				drop()
				return nil, fmt.Errorf("work: take range %d: %w", r.Val.ID, lerr)
			}
			if lerr != nil || cle.Seq != tok {
				l.fenced.Add(1)
				return nil, fmt.Errorf("work: take range %d: our lease expired before the range was written: %w", r.Val.ID, ErrConflict)
			}
			r = cur
			continue
		}
		if err != nil {
			// The write may have landed though its answer never came (a
			// slow persist timed out, or ctx ended while it was applied).
			// Dropping our lease then would leave the range leased to us
			// with no lease: the next taker would count it as an expiry on
			// top of our attempt, and a slow persist alone would fail
			// ranges no worker ever failed. If it landed, it is ours.
			cur, ok := l.landed(ctx, nr, r.Seq, tok)
			if !ok {
				drop()
				return nil, err
			}
			seq, nr = cur.Seq, cur.Val
		}
		if expired {
			l.expired.Add(1)
		}
		if nr.State == StateFailed {
			_ = l.st.DropSpool(ctx, nr.ID)
			drop()
			return nil, nil
		}
		l.acquired.Add(1)
		return &Held{Range: nr, Token: tok, Holder: holder, rangeSeq: seq, lease: le}, nil
	}
}

// landed reports whether take's write of nr over the range record at seq
// prev was applied though its caller got an error, and returns the record
// it wrote. It reads with a context of its own, since ctx may be what
// ended. A leased range counts as ours only while our lease (token tok) is
// still the range's: otherwise it expired meanwhile, and the range is left
// to whoever takes it next, as any expired one.
func (l *Leases) landed(ctx context.Context, nr Range, prev, tok uint64) (Versioned[Range], bool) {
	cur, ok := l.rangeLanded(ctx, nr, prev)
	if !ok {
		return cur, false
	}
	if nr.State == StateLeased {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		le, err := l.st.Lease(cctx, nr.ID)
		if err != nil || le.Seq != tok {
			return cur, false
		}
	}
	return cur, true
}

// renew writes h's lease changed by fn under h.Token and moves the token.
func (l *Leases) renew(ctx context.Context, h *Held, what string, fn func(*Lease)) error {
	le := h.lease
	fn(&le)
	tok, err := l.st.PutLease(ctx, le, h.Token, l.ttlFor(le))
	if err != nil && !errors.Is(err, ErrConflict) {
		// The write may have landed though its answer never came (a slow
		// persist timed out, or ctx ended while it was applied). Keeping
		// the old token then fences our next call, and the lease runs out
		// and counts as an expiry: a slow Heartbeat cost its holder the
		// range, a slow Release the attempt it was giving back. If it
		// landed, the token moved.
		if cur, ok := l.renewLanded(ctx, h, le); ok {
			tok, err = cur, nil
		}
	}
	if err != nil {
		return fenceErr(what, h.Range.ID, err)
	}
	h.Token, h.lease = tok, le
	return nil
}

// renewLanded reports whether renew's write of le under h.Token was
// applied though its caller got an error, and returns the token it moved
// the lease to. It reads with a context of its own, since ctx may be what
// ended. The lease is ours only if it was written since h.Token with
// exactly le (only its expiry, set by the write, is not compared) and the
// range is still as we last wrote it: any other holder would have taken
// it, and so written it, first.
func (l *Leases) renewLanded(ctx context.Context, h *Held, le Lease) (uint64, bool) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	cur, err := l.st.Lease(cctx, h.Range.ID)
	if err != nil || cur.Seq <= h.Token {
		return 0, false
	}
	got := cur.Val
	got.Expires, le.Expires = 0, 0
	if !sameJSON(got, le) {
		return 0, false
	}
	r, err := l.st.Range(cctx, h.Range.ID)
	if err != nil || r.Seq != h.rangeSeq {
		return 0, false
	}
	return cur.Seq, true
}

// rangeLanded reports whether a compare-and-set of range nr on prev, made
// under the range's lease, was applied though its caller got an error, and
// returns the record it wrote. It reads with a context of its
// own, since ctx may be what ended. Only the time of the change, set by
// the write, is not compared.
func (l *Leases) rangeLanded(ctx context.Context, nr Range, prev uint64) (Versioned[Range], bool) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	cur, err := l.st.Range(cctx, nr.ID)
	if err != nil || cur.Seq <= prev {
		return cur, false
	}
	got := cur.Val
	got.Updated, nr.Updated = 0, 0
	return cur, sameJSON(got, nr)
}

// sameJSON reports whether a and b are stored alike: it compares what was
// written with what a read gave back (a json.RawMessage comes back
// compacted, an empty slice as nil).
func sameJSON(a, b any) bool {
	ja, err := json.Marshal(a)
	if err != nil {
		return false
	}
	jb, err := json.Marshal(b)
	return err == nil && bytes.Equal(ja, jb)
}

// Heartbeat renews h's lease with the last article handed to the indexer;
// ErrFenced when the lease is no longer h's.
func (l *Leases) Heartbeat(ctx context.Context, h *Held, progress int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return l.counted(l.renew(ctx, h, "heartbeat", func(le *Lease) { le.Progress = progress }))
}

// ReadAll records that every spooled line of h's range went to the
// indexer, with the indexer's result, and keeps the lease long enough that
// FinishAbandoned finishes the range if the holder dies before Finish.
func (l *Leases) ReadAll(ctx context.Context, h *Held, result json.RawMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return l.counted(l.renew(ctx, h, "read all", func(le *Lease) {
		le.Progress = h.Range.Last
		le.ReadAll = true
		le.Result = result
	}))
}

// Finish marks h's range done with result: first the lease (the fence; from
// then on the range is done whatever happens to the holder), then the
// range, then it drops the spool and the lease.
func (l *Leases) Finish(ctx context.Context, h *Held, result json.RawMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := l.renew(ctx, h, "finish", func(le *Lease) {
		le.Progress = h.Range.Last
		le.ReadAll = true
		le.Finished = true
		le.Result = result
	}); err != nil {
		if errors.Is(err, ErrFenced) {
			// FinishAbandoned may have finished it with the result our
			// ReadAll recorded: then it is done as we wanted.
			if cur, ok := l.doneAs(ctx, h, result); ok {
				h.Range, h.rangeSeq = cur.Val, cur.Seq
				return nil
			}
		}
		return l.counted(err)
	}
	r := h.Range
	r.State = StateDone
	r.Result = result
	r.Error = ""
	seq, err := l.st.PutRange(ctx, r, h.rangeSeq)
	if err != nil && !errors.Is(err, ErrConflict) {
		// The write may have landed though its answer never came: then the
		// range is done as we wanted, and only the clean-up is left. (An
		// error here made the caller take a done range for lost, and left
		// its Finished lease and spool to FinishAbandoned.)
		if cur, ok := l.rangeLanded(ctx, r, h.rangeSeq); ok {
			seq, err = cur.Seq, nil
		}
	}
	if errors.Is(err, ErrConflict) {
		// A Settle may have completed it from our Finished lease.
		cur, ok := l.doneAs(ctx, h, result)
		if !ok {
			return l.counted(fmt.Errorf("work: finish range %d: %w", r.ID, ErrFenced))
		}
		r, seq = cur.Val, cur.Seq
	} else if err != nil {
		return fmt.Errorf("work: finish range %d: %w", r.ID, err)
	}
	h.Range, h.rangeSeq = r, seq
	l.finished.Add(1)
	return l.cleanup(ctx, r.ID, h.Token)
}

// doneAs reports whether h's range is done by h's holder with result
// (someone finished it from h's lease), and returns it.
func (l *Leases) doneAs(ctx context.Context, h *Held, result json.RawMessage) (Versioned[Range], bool) {
	cur, err := l.st.Range(ctx, h.Range.ID)
	if err != nil {
		return cur, false
	}
	return cur, cur.Val.State == StateDone && cur.Val.Holder == h.Holder && bytes.Equal(cur.Val.Result, result)
}

// cleanup drops a done range's spool, then its lease: in that order, so a
// spool that could not be dropped still has a Finished lease that leads
// the next Settle to it.
func (l *Leases) cleanup(ctx context.Context, id, token uint64) error {
	if err := l.st.DropSpool(ctx, id); err != nil {
		return fmt.Errorf("work: finish range %d: %w", id, err)
	}
	if err := l.st.DropLease(ctx, token); err != nil {
		return fmt.Errorf("work: finish range %d: %w", id, err)
	}
	return nil
}

// giveBack is Fail and Release: renew the lease (the fence: the range
// cannot be taken while we change it), write the range, drop the lease.
func (l *Leases) giveBack(ctx context.Context, h *Held, what string, fn func(*Range)) error {
	if h.lease.Finished {
		// A Finish got as far as the fence (its range write failed): the
		// range is done with the result the lease holds, and Settle (or
		// the next Acquire) completes it. Giving it back would have it
		// indexed again.
		return fmt.Errorf("work: %s range %d: its lease says finished: %w", what, h.Range.ID, ErrFenced)
	}
	if err := l.renew(ctx, h, what, func(*Lease) {}); err != nil {
		return err
	}
	r := h.Range
	fn(&r)
	seq, err := l.st.PutRange(ctx, r, h.rangeSeq)
	if err != nil && !errors.Is(err, ErrConflict) {
		// The write may have landed though its answer never came: then the
		// range is given back, and our lease (which kept anyone from taking
		// it until it ran out) is to be dropped as if the answer had come.
		if cur, ok := l.rangeLanded(ctx, r, h.rangeSeq); ok {
			seq, err = cur.Seq, nil
		}
	}
	if err != nil {
		return fenceErr(what, r.ID, err)
	}
	h.Range, h.rangeSeq = r, seq
	if r.State == StateFailed {
		// A failed range is done with; its lines can be fetched again if
		// someone re-plans it.
		if err := l.st.DropSpool(ctx, r.ID); err != nil {
			return fmt.Errorf("work: %s range %d: %w", what, r.ID, err)
		}
	}
	if err := l.st.DropLease(ctx, h.Token); err != nil {
		return fmt.Errorf("work: %s range %d: %w", what, r.ID, err)
	}
	return nil
}

// Fail gives h's range back after a failed attempt: spooled again, or
// failed with missed (the article runs never read; nil means the whole
// range) and reason once it has had MaxAttempts leases (every lease
// counts, failed or expired, less those Release gave back). ErrFenced
// when the lease is lost, or says finished (a Finish of h got that far).
func (l *Leases) Fail(ctx context.Context, h *Held, reason string, missed [][2]int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := l.giveBack(ctx, h, "fail", func(r *Range) {
		r.Error = reason
		if r.Attempts >= l.cfg.MaxAttempts {
			r.State = StateFailed
			r.Missed = missed
			if r.Missed == nil {
				r.Missed = [][2]int64{{r.First, r.Last}}
			}
		} else {
			r.State = StateSpooled
		}
	})
	if err == nil {
		l.failed.Add(1)
	}
	return l.counted(err)
}

// Release gives h's range back unfinished without using up an attempt
// (its holder is stopping); ErrFenced as for Fail.
func (l *Leases) Release(ctx context.Context, h *Held) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := l.giveBack(ctx, h, "release", func(r *Range) {
		r.State = StateSpooled
		r.Attempts = max(r.Attempts-1, 0)
	})
	if err == nil {
		l.released.Add(1)
	}
	return l.counted(err)
}

// Settle completes range id if its lease says Finished (the holder died
// between marking the lease and the range) and reports whether it did.
func (l *Leases) Settle(ctx context.Context, id uint64) (bool, error) {
	le, err := l.st.Lease(ctx, id)
	if errors.Is(err, persist.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("work: settle range %d: %w", id, err)
	}
	if !le.Val.Finished {
		return false, nil
	}
	r, err := l.st.Range(ctx, id)
	if err != nil {
		return false, fmt.Errorf("work: settle range %d: %w", id, err)
	}
	return l.settle(ctx, r, le)
}

// settle marks r done with the result of its Finished lease le. A lease
// entry with Finished (or ReadAll) set can only belong to the holder whose
// Acquire last wrote the range: the entry exists, so nobody could have
// leased the range since.
func (l *Leases) settle(ctx context.Context, r Versioned[Range], le Versioned[Lease]) (bool, error) {
	id := r.Val.ID
	for {
		switch {
		case r.Val.State == StateDone:
			// Done already: only the clean-up was left.
			return false, l.cleanup(ctx, id, le.Seq)
		case r.Val.State != StateLeased || r.Val.Holder != le.Val.Holder:
			return false, nil
		}
		nr := r.Val
		nr.State = StateDone
		nr.Result = le.Val.Result
		nr.Error = ""
		_, err := l.st.PutRange(ctx, nr, r.Seq)
		if errors.Is(err, ErrConflict) {
			if r, err = l.st.Range(ctx, id); err != nil {
				return false, fmt.Errorf("work: settle range %d: %w", id, err)
			}
			continue
		}
		if err != nil {
			// The write may have landed though its answer never came: then
			// the range is settled, and its Finished lease and spool are
			// to be dropped now, not left to FinishAbandoned.
			if _, ok := l.rangeLanded(ctx, nr, r.Seq); !ok {
				return false, fmt.Errorf("work: settle range %d: %w", id, err)
			}
		}
		l.settled.Add(1)
		return true, l.cleanup(ctx, id, le.Seq)
	}
}

// FinishAbandoned finishes, with the result their lease records, the
// ranges whose holder read everything (ReadAll or Finished) and whose lease
// was not written for QuietAfter; it returns how many it finished. A
// holder that was merely slow finds its lease fenced. It then drops the
// spools that done and failed ranges still hold (see sweepSpools).
func (l *Leases) FinishAbandoned(ctx context.Context) (int, error) {
	n, err := l.finishAbandoned(ctx)
	if ctx.Err() != nil {
		return n, err
	}
	return n, errors.Join(err, l.sweepSpools(ctx))
}

// sweepSpools drops the spool of every done or failed range that still
// holds messages: a holder whose spool drop failed after the range was
// written (Finish's clean-up, Fail's last attempt, take's failing of a
// range out of attempts) leaves it behind, and only a lease still alive
// would lead a Settle back to it. To stay cheap it asks for the spool's
// Inventory only of ranges written since the start of this process's last
// sweep that went through (less a round, for clocks that disagree); the
// first sweep of a process looks at every done or failed range once.
func (l *Leases) sweepSpools(ctx context.Context) error {
	start := time.Now()
	ranges, err := l.st.Ranges(ctx)
	if err != nil {
		return fmt.Errorf("work: sweep spools: %w", err)
	}
	from := l.sweptFrom.Load()
	var errs []error
	for _, r := range ranges {
		if (r.Val.State != StateDone && r.Val.State != StateFailed) || r.Val.Updated < from {
			continue
		}
		inv, err := l.st.Spool(r.Val.ID).Inventory(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("work: sweep spool of range %d: %w", r.Val.ID, err))
			continue
		}
		// Seq 0: no stream at all. A stream emptied but not dropped (by
		// an older version) still has its file, and goes too.
		if inv.Count == 0 && inv.Seq == 0 {
			continue
		}
		if err := l.st.DropSpool(ctx, r.Val.ID); err != nil {
			errs = append(errs, fmt.Errorf("work: sweep: %w", err))
			continue
		}
		l.swept.Add(1)
	}
	if len(errs) == 0 {
		l.sweptFrom.Store(start.Add(-l.cfg.AbandonedEvery).UnixMilli())
	}
	return errors.Join(errs...)
}

func (l *Leases) finishAbandoned(ctx context.Context) (int, error) {
	type quiet struct {
		seq uint64
		le  Lease
	}
	var found []quiet
	now := time.Now().UnixMilli()
	// Scanned directly rather than through Store.Leases: the write time of
	// each entry is what says it went quiet.
	if _, err := l.st.leases.Stream().Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		if m.Key == "" {
			return nil
		}
		var le Lease
		if err := json.Unmarshal(m.Value, &le); err != nil {
			// Nothing to finish it with; Status lists it, and the rest of
			// the round goes on.
			l.st.broken(BrokenRecord{Stream: streamLeases, Key: m.Key, Seq: m.Seq, Error: err.Error()})
			return nil
		}
		if (le.ReadAll || le.Finished) && now-m.Time >= l.cfg.QuietAfter.Milliseconds() {
			found = append(found, quiet{m.Seq, le})
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("work: finish abandoned: %w", err)
	}
	n := 0
	var errs []error
	for _, q := range found {
		le := q.le
		seq := q.seq
		if !le.Finished {
			// Fence the quiet holder first: its own Finish now fails.
			le.Finished = true
			var err error
			seq, err = l.st.PutLease(ctx, le, q.seq, l.readAllTTL())
			if errors.Is(err, ErrConflict) {
				continue // it spoke up (or finished) meanwhile
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("work: finish abandoned range %d: %w", le.Range, err))
				continue
			}
		}
		r, err := l.st.Range(ctx, le.Range)
		if err != nil {
			errs = append(errs, fmt.Errorf("work: finish abandoned range %d: %w", le.Range, err))
			continue
		}
		ok, err := l.settle(ctx, r, Versioned[Lease]{Seq: seq, Val: le})
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// retireBatch bounds the ranges one compare-and-set of a group record
// retires, and so the size of its Retiring list.
const retireBatch = 500

// Retire deletes the records of the done ranges that finished RetainDone
// ago or more, adding each to its group's Retired counts, and returns how
// many it retired. A range is retired only while no lease names it, after
// its spool is dropped, and only when its group has a record to count it
// in; failed ranges stay for the operator. Any number of processes may run
// it at once: a group's counts and the list of the ranges to delete are
// one compare-and-set on its record (see Group.Retiring), and the ranges
// are read again after the group record, so each is counted once whoever
// deletes it.
func (l *Leases) Retire(ctx context.Context) (int, error) {
	cutoff := l.now().Add(-l.cfg.RetainDone).UnixMilli()
	ranges, err := l.st.Ranges(ctx)
	if err != nil {
		return 0, fmt.Errorf("work: retire: %w", err)
	}
	leases, err := l.st.Leases(ctx)
	if err != nil {
		return 0, fmt.Errorf("work: retire: %w", err)
	}
	held := make(map[uint64]bool, len(leases))
	for _, le := range leases {
		held[le.Val.Range] = true
	}
	groups, err := l.st.Groups(ctx)
	if err != nil {
		return 0, fmt.Errorf("work: retire: %w", err)
	}
	due := map[string][]uint64{}
	for _, r := range ranges {
		if r.Val.State == StateDone && r.Val.Updated <= cutoff && !held[r.Val.ID] {
			due[r.Val.Group] = append(due[r.Val.Group], r.Val.ID)
		}
	}
	n := 0
	var errs []error
	for _, g := range groups {
		if len(due[g.Val.Name]) == 0 && len(g.Val.Retiring) == 0 {
			continue
		}
		k, err := l.retireGroup(ctx, g.Val.Name, due[g.Val.Name], cutoff)
		n += k
		if err != nil {
			if ctx.Err() != nil {
				return n, err
			}
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// retireGroup retires the ranges ids of group (done by cutoff, as a read
// said), after completing any retirement its record lists in Retiring.
func (l *Leases) retireGroup(ctx context.Context, group string, ids []uint64, cutoff int64) (int, error) {
	n := 0
	for {
		g, err := l.st.Group(ctx, group)
		if err != nil {
			return n, fmt.Errorf("work: retire %s: %w", group, err)
		}
		if len(g.Val.Retiring) > 0 {
			// Counted already (by us, or by a retirer that died): delete
			// the records, then clear the list.
			for _, id := range g.Val.Retiring {
				if err := l.st.deleteRange(ctx, id); err != nil {
					return n, fmt.Errorf("work: retire %s: %w", group, err)
				}
			}
			ng := g.Val
			ng.Retiring = nil
			if _, err := l.st.PutGroup(ctx, ng, g.Seq); err != nil && !errors.Is(err, ErrConflict) {
				return n, fmt.Errorf("work: retire %s: %w", group, err)
			}
			continue // read the record again, whoever cleared the list
		}
		if len(ids) == 0 {
			return n, nil
		}
		batch := ids[:min(len(ids), retireBatch)]
		retiring, add, err := l.retirable(ctx, g.Val, batch, cutoff)
		if err != nil {
			return n, fmt.Errorf("work: retire %s: %w", group, err)
		}
		if len(retiring) == 0 {
			ids = ids[len(batch):]
			continue
		}
		ok, err := l.claimRetired(ctx, g, retiring, add)
		if ok {
			n += len(retiring)
			l.retired.Add(int64(len(retiring)))
			ids = ids[len(batch):]
		}
		if err != nil {
			return n, fmt.Errorf("work: retire %s: %w", group, err)
		}
		// Not ok: another retirer counted some; read them all again.
	}
}

// retirable reads the ranges ids of group record g again, after g was
// read: a range another retirer counted since our first read is gone by
// now, or it was counted after g, which claimRetired then sees. It returns
// those still done by cutoff with no lease and not claimed by a planner,
// having dropped their spools (once the record is gone, nothing would
// lead the abandoned round's sweep to a spool), with what they add up to.
func (l *Leases) retirable(ctx context.Context, g Group, ids []uint64, cutoff int64) ([]uint64, Retired, error) {
	var out []uint64
	var add Retired
	for _, id := range ids {
		if slices.ContainsFunc(g.Pending, func(p Range) bool { return p.ID == id }) {
			// Still claimed: the next planner writes it out with "must not
			// exist", which would bring a deleted record back.
			continue
		}
		r, err := l.st.Range(ctx, id)
		if errors.Is(err, persist.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, add, err
		}
		if r.Val.State != StateDone || r.Val.Updated > cutoff || r.Val.Group != g.Name {
			continue
		}
		if _, err := l.st.Lease(ctx, id); !errors.Is(err, persist.ErrNotFound) {
			continue // a lease names it (or could not be read): not now
		}
		if err := l.st.DropSpool(ctx, id); err != nil {
			return nil, add, err
		}
		out = append(out, id)
		add.Ranges++
		add.Articles += r.Val.Size()
		add.Unmatched += resultUnmatched(r.Val.Result)
	}
	return out, add, nil
}

// claimRetired adds add to group record g's Retired and lists ids in its
// Retiring, then deletes their records and clears the list (a conflict
// there is left to the next read of the record). It reports false when
// another retirer counted ranges since g was read: ids must be read again.
// A conflict with any other writer (the planner moves the marks every tail
// round) is retried on the record as it is now: Retired only grows, so an
// unchanged Retired and an empty Retiring mean no retirer came between.
func (l *Leases) claimRetired(ctx context.Context, g Versioned[Group], ids []uint64, add Retired) (bool, error) {
	was := g.Val.Retired
	for {
		ng := g.Val
		ng.Retired.Ranges += add.Ranges
		ng.Retired.Articles += add.Articles
		ng.Retired.Unmatched += add.Unmatched
		ng.Retiring = ids
		seq, err := l.st.PutGroup(ctx, ng, g.Seq)
		if errors.Is(err, ErrConflict) {
			if g, err = l.st.Group(ctx, g.Val.Name); err != nil {
				return false, err
			}
			if g.Val.Retired != was || len(g.Val.Retiring) > 0 {
				return false, nil
			}
			continue
		}
		if err != nil {
			// It may have landed though its answer never came: then the
			// next round completes it from Retiring.
			return false, err
		}
		for _, id := range ids {
			if err := l.st.deleteRange(ctx, id); err != nil {
				return true, err
			}
		}
		ng.Retiring = nil
		if _, err := l.st.PutGroup(ctx, ng, seq); err != nil && !errors.Is(err, ErrConflict) {
			return true, err
		}
		return true, nil
	}
}
