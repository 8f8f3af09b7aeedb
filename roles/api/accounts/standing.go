package accounts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// An access token is signed for its whole lifetime, but what it may do is
// decided on each request: the account's current role and state, and
// whether the session (refresh family) it was issued in is still live, are
// read back through a StandingCache. Every change that takes rights away
// (a new role, deactivation, deletion, logout, a password change or reset,
// a reused refresh token) goes through the Store, which reports the
// account to its OnChange listeners once the change is committed; they
// drop the cached answers for it, here and in the other replicas.

// ErrSessionEnded is the answer for an access token whose session was
// ended (logout, password change or reset, refresh-token reuse,
// deactivation) or whose account is inactive or gone.
var ErrSessionEnded = errors.New("the session of this token has ended")

// Standing is an account's current rights, as an access token's holder
// exercises them.
type Standing struct {
	UserID     string
	TenantUUID string
	Role       string
}

// OnChange registers fn to be told, after the commit, of every change to
// an account's role, state, password or sessions. Register before the
// store serves requests; fn must not block for long (it runs in the
// request that made the change).
func (s *Store) OnChange(fn func(ctx context.Context, userID string)) {
	s.listeners = append(s.listeners, fn)
}

// changed tells the listeners that userID's rights or sessions changed.
func (s *Store) changed(ctx context.Context, userID string) {
	for _, fn := range s.listeners {
		fn(ctx, userID)
	}
}

// Standing reads the rights of userID as a token of session family may
// use them: ErrSessionEnded unless the account exists, is active and the
// session is live.
func (s *Store) Standing(ctx context.Context, userID, family string) (Standing, error) {
	if _, err := codec.ParseUUID(userID); err != nil || family == "" {
		return Standing{}, ErrSessionEnded
	}
	// Read-only: on SQLite it runs beside the one writer instead of
	// queueing behind it; WAL readers see every committed change.
	conn := s.db.ReadSQL()
	var st Standing
	var active bool
	var fam sql.NullString
	var revoked db.Timestamp
	err := conn.QueryRowContext(ctx, `SELECT u.tenant_uuid, u.role, u.active, f.id, f.revoked_at FROM users u
		LEFT JOIN refresh_families f ON f.id = $2 AND f.user_id = u.id WHERE u.id = $1`, userID, family).
		Scan(&st.TenantUUID, &st.Role, &active, &fam, &revoked)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Standing{}, ErrSessionEnded
	case err != nil:
		return Standing{}, fmt.Errorf("read account standing: %w", err)
	case !active || !fam.Valid || !revoked.IsZero():
		return Standing{}, ErrSessionEnded
	}
	st.UserID = userID
	return st, nil
}

// StandingCache answers Standing from memory for a short time, so that
// checking every request costs a map lookup rather than a query. The
// Store's changes drop the entries of the account they touch at once
// (Invalidate); the TTL bounds how long an invalidation lost on its way
// from another replica can leave an answer stale.
type StandingCache struct {
	store *Store
	ttl   time.Duration
	max   int
	now   func() time.Time

	mu sync.Mutex
	// gen counts invalidations: an answer read while one happened may
	// predate the change, so it is used once but not kept.
	gen     uint64
	entries map[string]map[string]standingEntry // user, family
	n       int
}

type standingEntry struct {
	st      Standing
	err     error // nil or ErrSessionEnded
	expires time.Time
}

// NewStandingCache returns a cache over store keeping answers for ttl, at
// most max of them, and registers it for the store's changes.
func NewStandingCache(store *Store, ttl time.Duration, max int) *StandingCache {
	c := &StandingCache{store: store, ttl: ttl, max: max, now: time.Now, entries: map[string]map[string]standingEntry{}}
	store.OnChange(func(_ context.Context, userID string) { c.Invalidate(userID) })
	return c
}

// Standing is Store.Standing through the cache. Database errors are not
// kept: the next request asks again.
func (c *StandingCache) Standing(ctx context.Context, userID, family string) (Standing, error) {
	c.mu.Lock()
	e, ok := c.entries[userID][family]
	gen := c.gen
	c.mu.Unlock()
	if ok && c.now().Before(e.expires) {
		return e.st, e.err
	}
	st, err := c.store.Standing(ctx, userID, family)
	if err != nil && !errors.Is(err, ErrSessionEnded) {
		return Standing{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return st, err
	}
	if c.n >= c.max {
		// Bounded by dropping everything: refilling costs one query per
		// active session, and a set this large is rare.
		c.entries, c.n = map[string]map[string]standingEntry{}, 0
	}
	fams := c.entries[userID]
	if fams == nil {
		fams = map[string]standingEntry{}
		c.entries[userID] = fams
	}
	if _, had := fams[family]; !had {
		c.n++
	}
	fams[family] = standingEntry{st: st, err: err, expires: c.now().Add(c.ttl)}
	return st, err
}

// Invalidate drops what the cache knows of userID.
func (c *StandingCache) Invalidate(userID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.n -= len(c.entries[userID])
	delete(c.entries, userID)
}

// Purge drops every entry, for when invalidations may have been missed.
func (c *StandingCache) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.entries, c.n = map[string]map[string]standingEntry{}, 0
}
