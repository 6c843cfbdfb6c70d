package persist

// Hooks for the external tests (package persist_test), which need a server
// and so cannot live in this package: persist/server imports persist.

// SetAfterSave installs a hook that runs when a LiveKV write was committed,
// before its result is recorded.
func (lk *LiveKV) SetAfterSave(f func(seq uint64)) { lk.afterSave = f }

// Holds reports whether the local copy holds key, pending writes aside.
func (lk *LiveKV) Holds(key string) bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	_, ok := lk.cur[key]
	return ok
}

// SetBeforeSave installs a hook that runs before each LiveKV write is sent.
func (lk *LiveKV) SetBeforeSave(f func()) { lk.beforeSave = f }

// Lock holds the copy's lock, which blocks its watcher's callback.
func (lk *LiveKV) Lock() { lk.mu.Lock() }

// Unlock releases Lock.
func (lk *LiveKV) Unlock() { lk.mu.Unlock() }

// Empty reports whether the copy holds no entry and no seq index.
func (lk *LiveKV) Empty() bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return len(lk.cur) == 0 && len(lk.bySeq) == 0
}

// Overflowed reports whether the copy's watcher overflowed its buffer.
func (lk *LiveKV) Overflowed() bool { return lk.w.overflow.Load() }

// Resyncs is the number of resyncs of the copy's watcher.
func (lk *LiveKV) Resyncs() uint64 { return lk.w.Resyncs() }

// CachedOwners is the number of scopes whose owner the client remembers.
func (c *Client) CachedOwners() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.owners)
}

// SetWatchMaxPreDeleted bounds the early deletes the watchers made from now
// on remember, until restore runs.
func SetWatchMaxPreDeleted(n int) (restore func()) {
	old := watchMaxPreDeleted
	watchMaxPreDeleted = n
	return func() { watchMaxPreDeleted = old }
}

// FeedSubscriptions is how many live feed subscriptions c's watchers hold:
// one per hub, so one per watched stream when watchers share.
func FeedSubscriptions(c *Client) int {
	feedHubs.mu.Lock()
	defer feedHubs.mu.Unlock()
	n := 0
	for k, h := range feedHubs.m {
		if k.c == c && h.sub.IsValid() {
			n++
		}
	}
	return n
}
