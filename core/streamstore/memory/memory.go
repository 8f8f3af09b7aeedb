// Package memory is the in-process stream store of `edgeplat all-in-one`:
// the semantics of the Redis implementation without an external service,
// held to them by the streamstore/storetest suite. It refuses writes past
// MaxMemory with streamstore.ErrOutOfMemory, like Redis with noeviction,
// while reads, acknowledgements and trims always work. See
// docs/stream-store.md, section In-process.
package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// DefaultMaxMemory caps a store whose Options leave MaxMemory at zero.
const DefaultMaxMemory = 256 << 20

// Options configures a Store. The zero value of a field takes its default.
type Options struct {
	// MaxMemory caps the estimated bytes held; DefaultMaxMemory when 0.
	// There is no unlimited setting: an in-process store that grows without
	// bound takes the whole all-in-one process down with it.
	MaxMemory int64
	// SubscriptionBuffer is how many messages a subscription buffers before
	// it drops; 256 when 0.
	SubscriptionBuffer int
	// SweepInterval is how often expired keys are removed; 1 s when 0.
	SweepInterval time.Duration
	// Now is the clock for entry ids, idle times and TTLs; time.Now by
	// default. Tests set it.
	Now func() time.Time
}

// Estimated sizes of the bookkeeping around the payload bytes.
const (
	streamOverhead = 256
	groupOverhead  = 128
	entryOverhead  = 64
	fieldOverhead  = 16
	nackOverhead   = 64
	keyOverhead    = 96 // the kv, the map slot and the expiry heap item
)

// Store is the in-process stream store. Create it with New.
type Store struct {
	opts Options
	done chan struct{} // closed by Close

	mu       sync.Mutex
	closed   bool
	used     int64
	streams  map[string]*stream
	keys     map[string]*kv
	expiries expiryHeap
	sweeping bool
	sweepWG  sync.WaitGroup

	subsMu     sync.RWMutex
	subsClosed bool
	subs       map[string]map[*subscription]struct{}
}

// New validates opts and returns an empty store. It starts no goroutine.
func New(opts Options) (*Store, error) {
	if opts.MaxMemory < 0 || opts.SubscriptionBuffer < 0 || opts.SweepInterval < 0 {
		return nil, errors.New("memory streamstore: MaxMemory, SubscriptionBuffer and SweepInterval must not be negative")
	}
	if opts.MaxMemory == 0 {
		opts.MaxMemory = DefaultMaxMemory
	}
	if opts.SubscriptionBuffer == 0 {
		opts.SubscriptionBuffer = 256
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{
		opts:    opts,
		done:    make(chan struct{}),
		streams: make(map[string]*stream),
		keys:    make(map[string]*kv),
		subs:    make(map[string]map[*subscription]struct{}),
	}, nil
}

// lock checks ctx and that the store is open, and locks it. On error the
// store is not locked.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return streamstore.ErrClosed
	}
	return nil
}

// reserve accounts n more bytes, refusing when that passes MaxMemory.
func (s *Store) reserve(n int64) error {
	if s.used+n > s.opts.MaxMemory {
		return fmt.Errorf("%w: %d of %d bytes in use, %d more needed", streamstore.ErrOutOfMemory, s.used, s.opts.MaxMemory, n)
	}
	s.used += n
	return nil
}

// Memory reports the estimated bytes in use and the cap.
func (s *Store) Memory(ctx context.Context) (used, max int64, err error) {
	if err := s.lock(ctx); err != nil {
		return 0, 0, fmt.Errorf("memory: %w", err)
	}
	defer s.mu.Unlock()
	return s.used, s.opts.MaxMemory, nil
}

// Ping reports whether the store is open.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.lock(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	s.mu.Unlock()
	return nil
}

// Close wakes blocked reads (they return ErrClosed), stops the expiry
// sweep, closes every subscription and drops the data.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.streams, s.keys, s.expiries, s.used = nil, nil, nil, 0
	s.mu.Unlock()
	s.sweepWG.Wait()
	s.closeSubscriptions()
	return nil
}

// The store must satisfy the contract the roles are written against.
var _ streamstore.Store = (*Store)(nil)
