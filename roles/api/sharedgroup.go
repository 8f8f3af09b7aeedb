package api

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/streamstore"
)

// A serve-api replica leaves its MQTT shared group when it stops only if
// another member is alive to take the group's messages: with nobody
// subscribed the broker discards what is published, while a kept
// persistent session queues it for the replica's return. The replicas
// learn of each other through a small record in the stream store's Redis:
// one sorted set per installation and group, a member per client id
// scored with the time its heartbeat expires. See docs/scaling.md.

// Defaults of the membership record.
const (
	// groupHeartbeat is how often a connected replica renews its record.
	groupHeartbeat = 5 * time.Second
	// groupTTL is how long a record outlives its last heartbeat: a replica
	// that crashed stops counting as a member after it.
	groupTTL = 3 * groupHeartbeat
	// groupKeyPrefix starts the key, as redislimit.DefaultPrefix does the
	// rate limits'; the rest is one hash tag, though one key needs none
	// on a Redis Cluster.
	groupKeyPrefix = "edgeplat:mqttgroup:"
)

// groupScript's KEYS[1] is the group's record, ARGV[1] the client id,
// ARGV[2] "beat" (renew) or "leave" (remove, then count the others), ARGV[3]
// the TTL in ms. It reads the server's clock, which every replica shares,
// so skew between replicas' clocks cannot keep a dead one alive.
var groupScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[2] == 'beat' then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 1
end
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('ZCARD', KEYS[1])
`)

// scripterStore is a stream store on Redis (streamstore/redis); the
// in-process store of all-in-one has no Redis, and no other replica.
type scripterStore interface {
	Scripter() goredis.Scripter
}

// groupMembers is the lifecycle service that keeps this replica's record
// and answers mqttx.Options.LeaveShared.
type groupMembers struct {
	redis goredis.Scripter
	// scope names the installation, whose replicas share a record.
	scope     func(ctx context.Context) (string, error)
	group     string
	clientID  func() string // the MQTT client's id, resolved at its Start
	connected func() bool
	log       *slog.Logger
	every     time.Duration
	ttl       time.Duration
	// connect (cap 1) is signalled when the client connects, so the
	// record is there from then on rather than from the next heartbeat.
	connect chan struct{}

	key, id string // set at Start
}

// newGroupMembers returns the membership service for a replica of the
// shared group, or nil when there is nothing to record: no group, or no
// Redis (all-in-one's in-process store), where the replica never leaves.
func newGroupMembers(store streamstore.Store, d *db.DB, group string, clientID func() string, connected func() bool, log *slog.Logger) *groupMembers {
	s, ok := store.(scripterStore)
	if group == "" || !ok {
		return nil
	}
	scope := func(ctx context.Context) (string, error) {
		in, err := d.Installation(ctx)
		return in.ID, err
	}
	return &groupMembers{redis: s.Scripter(), scope: scope, group: group, clientID: clientID, connected: connected, log: log,
		every: groupHeartbeat, ttl: groupTTL, connect: make(chan struct{}, 1)}
}

func (g *groupMembers) Name() string { return "api-mqtt-group" }

// Start scopes the record by the installation id, as the rate limits are
// (limitScope): installations and test runs sharing one Redis count their
// members apart. It comes after the MQTT client's Start, which resolves
// the client id.
func (g *groupMembers) Start(ctx context.Context) error {
	scope, err := g.scope(ctx)
	if err != nil {
		return fmt.Errorf("mqtt group membership: the installation id that scopes it: %w", err)
	}
	g.key = groupKeyPrefix + "{" + scope + ":" + g.group + "}"
	g.id = g.clientID()
	return nil
}

// Run renews the record while the client is connected; a replica cut off
// from the broker is no member to leave the group's messages to.
func (g *groupMembers) Run(ctx context.Context) error {
	t := time.NewTicker(g.every)
	defer t.Stop()
	for {
		if g.connected() {
			if err := g.beat(ctx); err != nil && ctx.Err() == nil {
				g.log.Warn("mqtt group membership not renewed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-g.connect:
		}
	}
}

// StateChanged is told the MQTT client's state changes (OnStateChange);
// it must not block.
func (g *groupMembers) StateChanged(_, to mqttx.State) {
	if to == mqttx.StateConnected {
		select {
		case g.connect <- struct{}{}:
		default:
		}
	}
}

// Stop removes the record, so no other replica leaves the group counting
// on this one.
func (g *groupMembers) Stop(ctx context.Context) error {
	if _, err := g.remove(ctx); err != nil {
		// It expires within the TTL; meanwhile another replica may leave
		// counting on this one, as after a crash.
		g.log.Warn("mqtt group membership not removed", "err", err)
	}
	return nil
}

// Leave is mqttx.Options.LeaveShared: it removes this replica's record and
// answers true only when another live member remains. Removing and
// counting are one script, so of two replicas stopping at once at most one
// leaves: each removes itself before it counts.
func (g *groupMembers) Leave(ctx context.Context) bool {
	others, err := g.remove(ctx)
	if err != nil {
		g.log.Warn("mqtt group membership unknown; keeping the session", "err", err)
		return false
	}
	if others == 0 {
		g.log.Info("mqtt last member of the shared group; keeping the session so the broker queues for it", "group", g.group)
	}
	return others > 0
}

func (g *groupMembers) beat(ctx context.Context) error {
	return groupScript.Run(ctx, g.redis, []string{g.key}, g.id, "beat", g.ttl.Milliseconds()).Err()
}

// remove deletes the record and returns how many other members are alive.
func (g *groupMembers) remove(ctx context.Context) (int64, error) {
	if g.key == "" {
		return 0, nil // never started
	}
	n, err := groupScript.Run(ctx, g.redis, []string{g.key}, g.id, "leave", g.ttl.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("mqtt group %s: %w", g.key, err)
	}
	return n, nil
}

var _ lifecycle.Service = (*groupMembers)(nil)
