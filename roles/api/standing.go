package api

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// Access tokens are checked against the account on every request through
// an accounts.StandingCache (see docs/access.md, "Sessions and access
// tokens"). A replica learns of the changes it makes itself at once; the
// changes other replicas make reach it on a stream-store pub/sub channel
// (Redis for serve-api, the in-process store in all-in-one). Pub/sub is at
// most once, and go-redis resubscribes after a reconnection without
// telling: a lost message leaves a cached answer stale for at most
// standingTTL, which is why the TTL is short.
const (
	standingTTL = 5 * time.Second
	// standingMax bounds the cached answers (one per live session in use).
	standingMax = 10000
	// accountChangesChannel carries the id of each account whose rights or
	// sessions changed.
	accountChangesChannel = "edgeplat:auth:account-changed"
	// publishTimeout bounds the notice of a change, sent from the request
	// that made it.
	publishTimeout = 2 * time.Second
)

// standingSync keeps a StandingCache in step with the changes the other
// replicas make, and tells them of this replica's.
type standingSync struct {
	cache   *accounts.StandingCache
	streams streamstore.Store
	log     *slog.Logger
	// retry is the first wait before subscribing again after a failure;
	// it doubles up to maxRetry while the failures go on.
	retry, maxRetry time.Duration
	// subscribed is true while the feed is heard.
	subscribed atomic.Bool
}

func newStandingSync(cache *accounts.StandingCache, streams streamstore.Store, log *slog.Logger) *standingSync {
	return &standingSync{cache: cache, streams: streams, log: log, retry: time.Second, maxRetry: 30 * time.Second}
}

// publish tells the other replicas that userID changed. It runs after the
// change is committed, in the request that made it; a failure is logged
// and left to standingTTL.
func (s *standingSync) publish(ctx context.Context, userID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	if err := s.streams.Publish(ctx, accountChangesChannel, []byte(userID)); err != nil {
		s.log.Warn("account change not told to the other replicas; their cached rights expire on their own",
			"user", userID, "expires_within", standingTTL, "err", err)
	}
}

// Name implements lifecycle.Service.
func (s *standingSync) Name() string { return "api-session-sync" }

// Start implements lifecycle.Service; Run subscribes, so a stream store
// that is down at start delays nothing.
func (s *standingSync) Start(context.Context) error { return nil }

// Run implements lifecycle.Service: it drops the cached answers for every
// account another replica reports, until ctx ends.
func (s *standingSync) Run(ctx context.Context) error {
	wait := s.retry
	for {
		heard, err := s.follow(ctx)
		// Whatever was published while not subscribed is lost.
		s.cache.Purge()
		if ctx.Err() != nil {
			return nil
		}
		if heard {
			wait = s.retry
		}
		s.log.Warn("account change feed interrupted; other replicas' changes reach this one through the cache's expiry until it is back",
			"expiry", standingTTL, "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, s.maxRetry)
	}
}

// follow subscribes and applies the messages until the subscription or ctx
// ends; heard reports whether the subscription took hold.
func (s *standingSync) follow(ctx context.Context) (heard bool, err error) {
	sub, err := s.streams.Subscribe(ctx, accountChangesChannel)
	if err != nil {
		return false, err // the store names the channel
	}
	defer func() { _ = sub.Close() }()
	// Changes made before the subscription took hold were not heard.
	s.cache.Purge()
	s.subscribed.Store(true)
	defer s.subscribed.Store(false)
	dropped := sub.Dropped()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case m, ok := <-sub.C():
			if !ok {
				return true, errors.New("subscription closed")
			}
			if d := sub.Dropped(); d != dropped {
				dropped = d
				s.cache.Purge()
				continue
			}
			s.cache.Invalidate(string(m.Payload))
		}
	}
}

// Stop implements lifecycle.Service.
func (s *standingSync) Stop(context.Context) error { return nil }

var _ lifecycle.Service = (*standingSync)(nil)
