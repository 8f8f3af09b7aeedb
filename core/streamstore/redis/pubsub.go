package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// Publish runs PUBLISH; see streamstore.Store.
func (s *Store) Publish(ctx context.Context, channel string, payload []byte) error {
	if err := s.client.Publish(ctx, channel, payload).Err(); err != nil {
		return s.wrap(ctx, "publish", channel, err)
	}
	return nil
}

// subscription forwards go-redis's channel, which also pings the
// connection and resubscribes after a reconnect, into a bounded buffer
// without ever blocking, so a slow reader drops messages (counted) instead
// of stalling go-redis's reader and, behind it, Redis's output buffer.
type subscription struct {
	s       *Store
	ps      *goredis.PubSub
	out     chan streamstore.Message
	dropped atomic.Uint64
	done    chan struct{} // closed when the forwarder has ended
	once    sync.Once
}

// Subscribe sends SUBSCRIBE and waits for the server's confirmations, so
// that publishing right after it returns reaches the subscription. See
// streamstore.Store.
func (s *Store) Subscribe(ctx context.Context, channels ...string) (streamstore.Subscription, error) {
	what := strings.Join(channels, ",")
	if len(channels) == 0 {
		return nil, errors.New("subscribe: no channels")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", what, err)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("subscribe %s: %w", what, streamstore.ErrClosed)
	}
	sub := &subscription{
		s:    s,
		ps:   s.client.Subscribe(ctx, channels...),
		out:  make(chan streamstore.Message, s.opts.SubscriptionBuffer),
		done: make(chan struct{}),
	}
	// Redis confirms each channel argument, duplicates included.
	for confirmed := 0; confirmed < len(channels); {
		msg, err := sub.ps.ReceiveTimeout(ctx, s.opts.ReadTimeout)
		if err != nil {
			_ = sub.ps.Close()
			return nil, s.wrap(ctx, "subscribe", what, err)
		}
		switch m := msg.(type) {
		case *goredis.Subscription:
			if m.Kind == "subscribe" {
				confirmed++
			}
		case *goredis.Message:
			sub.deliver(m)
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = sub.ps.Close()
		return nil, fmt.Errorf("subscribe %s: %w", what, streamstore.ErrClosed)
	}
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	go sub.forward(sub.ps.Channel())
	return sub, nil
}

func (sub *subscription) deliver(m *goredis.Message) {
	select {
	case sub.out <- streamstore.Message{Channel: m.Channel, Payload: []byte(m.Payload)}:
	default:
		sub.dropped.Add(1)
	}
}

// forward runs until go-redis closes in, which it does once the PubSub is
// closed.
func (sub *subscription) forward(in <-chan *goredis.Message) {
	defer close(sub.done)
	defer close(sub.out)
	for m := range in {
		sub.deliver(m)
	}
}

func (sub *subscription) C() <-chan streamstore.Message { return sub.out }
func (sub *subscription) Dropped() uint64               { return sub.dropped.Load() }

// Close unsubscribes and waits for the forwarder to end.
func (sub *subscription) Close() error {
	sub.s.mu.Lock()
	delete(sub.s.subs, sub)
	sub.s.mu.Unlock()
	return sub.close()
}

func (sub *subscription) close() error {
	var err error
	sub.once.Do(func() {
		err = sub.ps.Close()
		<-sub.done
	})
	return err
}
