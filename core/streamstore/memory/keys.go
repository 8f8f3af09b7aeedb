package memory

import (
	"container/heap"
	"context"
	"fmt"
	"time"
)

// kv is a set-if-absent key.
type kv struct {
	value   string
	expires time.Time // zero: never
	size    int64
}

func (k *kv) expired(now time.Time) bool {
	return !k.expires.IsZero() && !now.Before(k.expires)
}

// expiryItem schedules key's removal; it is stale when keys[key] is no
// longer k (the key was deleted, or expired and set again).
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
	k := &kv{value: value, size: int64(keyOverhead + len(key) + len(value))}
	if err := s.reserve(k.size); err != nil {
		return false, fmt.Errorf("set %s nx: %w", key, err)
	}
	s.keys[key] = k
	if ttl > 0 {
		// Millisecond precision, at least 1 ms, as go-redis sends PX.
		k.expires = now.Add(max(ttl.Truncate(time.Millisecond), time.Millisecond))
		heap.Push(&s.expiries, expiryItem{at: k.expires, key: key, k: k})
		s.startSweep()
	}
	return true, nil
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
		if s.keys[it.key] == it.k {
			s.removeKey(it.key, it.k)
		}
	}
	return true
}
