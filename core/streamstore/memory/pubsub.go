package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// subscription is a bounded mailbox. Publish never blocks on it: a message
// that finds the buffer full is dropped and counted.
type subscription struct {
	s        *Store
	channels []string
	ch       chan streamstore.Message
	dropped  atomic.Uint64
	once     sync.Once
}

func (sub *subscription) C() <-chan streamstore.Message { return sub.ch }
func (sub *subscription) Dropped() uint64               { return sub.dropped.Load() }

// Close unsubscribes and closes C.
func (sub *subscription) Close() error {
	sub.s.subsMu.Lock()
	defer sub.s.subsMu.Unlock()
	sub.closeLocked()
	return nil
}

// closeLocked is called with subsMu held for writing, so no Publish is
// sending on ch while it closes.
func (sub *subscription) closeLocked() {
	sub.once.Do(func() {
		for _, c := range sub.channels {
			delete(sub.s.subs[c], sub)
			if len(sub.s.subs[c]) == 0 {
				delete(sub.s.subs, c)
			}
		}
		close(sub.ch)
	})
}

// Subscribe subscribes to channels; see streamstore.Store.
func (s *Store) Subscribe(ctx context.Context, channels ...string) (streamstore.Subscription, error) {
	if len(channels) == 0 {
		return nil, errors.New("subscribe: no channels")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	if s.subsClosed {
		return nil, fmt.Errorf("subscribe: %w", streamstore.ErrClosed)
	}
	sub := &subscription{
		s:        s,
		channels: slices.Compact(slices.Sorted(slices.Values(channels))),
		ch:       make(chan streamstore.Message, s.opts.SubscriptionBuffer),
	}
	for _, c := range sub.channels {
		if s.subs[c] == nil {
			s.subs[c] = make(map[*subscription]struct{})
		}
		s.subs[c][sub] = struct{}{}
	}
	return sub, nil
}

// Publish delivers payload to channel's subscribers, each its own copy;
// see streamstore.Store.
func (s *Store) Publish(ctx context.Context, channel string, payload []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish %s: %w", channel, err)
	}
	s.subsMu.RLock()
	defer s.subsMu.RUnlock()
	if s.subsClosed {
		return fmt.Errorf("publish %s: %w", channel, streamstore.ErrClosed)
	}
	for sub := range s.subs[channel] {
		select {
		case sub.ch <- streamstore.Message{Channel: channel, Payload: slices.Clone(payload)}:
		default:
			sub.dropped.Add(1)
		}
	}
	return nil
}

func (s *Store) closeSubscriptions() {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	s.subsClosed = true
	for _, set := range s.subs {
		for sub := range set {
			sub.closeLocked()
		}
	}
	s.subs = nil
}
