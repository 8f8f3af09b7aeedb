package memory

import (
	"container/heap"
	"context"
	"fmt"
	"time"
)

// kv is a key holding a value: a set-if-absent mark, or a bitmap, which is
// a value read and written bit by bit, as in Redis.
type kv struct {
	data    []byte
	expires time.Time // zero: never
	// sweepAt is the time of the key's item in the expiry heap, zero when
	// it has none.
	sweepAt time.Time
	size    int64
}

func (k *kv) expired(now time.Time) bool {
	return !k.expires.IsZero() && !now.Before(k.expires)
}

// expiryItem schedules a look at key's expiry; it is stale when keys[key]
// is no longer k (the key was deleted, or expired and set again) or when at
// is no longer k.sweepAt (an earlier item replaced it).
type expiryItem struct {
	at  time.Time
	key string
	k   *kv
}

// expiryHeap orders pending expiries, soonest first.
type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = expiryItem{}
	*h = old[:len(old)-1]
	return it
}

// liveKey returns the key, removing it first when it has expired (lazy
// expiry). Called with s.mu held.
func (s *Store) liveKey(key string, now time.Time) *kv {
	k := s.keys[key]
	if k == nil {
		return nil
	}
	if k.expired(now) {
		s.removeKey(key, k)
		return nil
	}
	return k
}

func (s *Store) removeKey(key string, k *kv) {
	delete(s.keys, key)
	s.used -= k.size
}

// SetNX sets key unless it exists; see streamstore.Store. A stream of the
// same name counts as existing, as in Redis's shared keyspace.
func (s *Store) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := s.lock(ctx); err != nil {
		return false, fmt.Errorf("set %s nx: %w", key, err)
	}
	defer s.mu.Unlock()
	return s.setNXLocked(key, value, ttl)
}

// setNXLocked is SetNX with s.mu held.
func (s *Store) setNXLocked(key, value string, ttl time.Duration) (bool, error) {
	now := s.opts.Now()
	if s.streams[key] != nil || s.liveKey(key, now) != nil {
		return false, nil
	}
	k := &kv{data: []byte(value), size: int64(keyOverhead + len(key) + len(value))}
	if err := s.reserve(k.size); err != nil {
		return false, fmt.Errorf("set %s nx: %w", key, err)
	}
	s.keys[key] = k
	if ttl > 0 {
		s.expire(key, k, ttl, now)
	}
	return true, nil
}

// bit reports bit off of the value, in Redis's order: bit 0 is the high bit
// of the first byte. Bits past the end are clear.
func (k *kv) bit(off uint16) bool {
	i := int(off / 8)
	return i < len(k.data) && k.data[i]&(0x80>>(off%8)) != 0
}

// setBitLocked sets bit off of key, creating or growing the bitmap as
// SETBIT does, and makes the key expire ttl from now. A stream of that name
// is errWrongType. Called with s.mu held.
func (s *Store) setBitLocked(key string, off uint16, ttl time.Duration) error {
	now := s.opts.Now()
	if s.streams[key] != nil {
		return fmt.Errorf("setbit %s: %w", key, errWrongType)
	}
	need := int(off/8) + 1
	k := s.liveKey(key, now)
	switch {
	case k == nil:
		k = &kv{data: make([]byte, need), size: int64(keyOverhead + len(key) + need)}
		if err := s.reserve(k.size); err != nil {
			return fmt.Errorf("setbit %s: %w", key, err)
		}
		s.keys[key] = k
	case need > len(k.data):
		grow := need - len(k.data)
		if err := s.reserve(int64(grow)); err != nil {
			return fmt.Errorf("setbit %s: %w", key, err)
		}
		k.data = append(k.data, make([]byte, grow)...)
		k.size += int64(grow)
	}
	k.data[off/8] |= 0x80 >> (off % 8)
	s.expire(key, k, ttl, now)
	return nil
}

// expire makes k expire ttl from now (millisecond precision, at least 1 ms,
// as go-redis sends PX) and makes sure the sweep will look at it.
// Refreshing a TTL usually moves the expiry later, and the heap item
// already scheduled then re-schedules itself when it comes due: a bitmap
// whose TTL every message refreshes keeps one heap item, not one per
// message. Called with s.mu held.
func (s *Store) expire(key string, k *kv, ttl time.Duration, now time.Time) {
	k.expires = now.Add(max(ttl.Truncate(time.Millisecond), time.Millisecond))
	if k.sweepAt.IsZero() || k.expires.Before(k.sweepAt) {
		s.schedule(key, k)
	}
}

// schedule pushes an expiry heap item for k at its expiry time.
func (s *Store) schedule(key string, k *kv) {
	k.sweepAt = k.expires
	heap.Push(&s.expiries, expiryItem{at: k.expires, key: key, k: k})
	s.startSweep()
}

// startSweep starts the expiry sweep once. Called with s.mu held, so it
// cannot race Close's sweepWG.Wait.
func (s *Store) startSweep() {
	if s.sweeping {
		return
	}
	s.sweeping = true
	s.sweepWG.Add(1)
	go s.sweep()
}

// sweep removes expired keys every SweepInterval until Close.
func (s *Store) sweep() {
	defer s.sweepWG.Done()
	t := time.NewTicker(s.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			for s.sweepSome(1000) {
			}
		}
	}
}

// sweepSome removes up to limit expired keys and reports whether more may
// be waiting; the lock is released between batches so a large expiry wave
// does not stall the store.
func (s *Store) sweepSome(limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	now := s.opts.Now()
	for range limit {
		if len(s.expiries) == 0 || now.Before(s.expiries[0].at) {
			return false
		}
		it := heap.Pop(&s.expiries).(expiryItem)
		k := it.k
		if s.keys[it.key] != k || !it.at.Equal(k.sweepAt) {
			continue
		}
		k.sweepAt = time.Time{}
		switch {
		case k.expired(now):
			s.removeKey(it.key, k)
		case !k.expires.IsZero():
			// The TTL was refreshed after this item was scheduled.
			s.schedule(it.key, k)
		}
	}
	return true
}
