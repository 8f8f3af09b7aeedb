package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// claims tracks the claims (see ProduceBatch) this store may hold without
// knowing it released them: a call whose pipeline broke after the claims
// were sent, or whose transaction Redis refused. Left alone such a claim
// keeps every copy of its message out for claimTTL. That cost little when
// a producer died, but Redis itself dying took the claims of every batch
// in flight into its append-only file and back, and with each refused copy
// forcing an MQTT reconnect, 30 s of refusals took 116 s to settle. So the
// store releases them itself, on its next call, before claiming anything.
//
// Each claim's value is a token of its own, and a release deletes the key
// only while it still holds that token: a claim that expired or ran its
// transaction and was taken by another producer since is left to it.
type claims struct {
	prefix string // random per store
	seq    atomic.Uint64

	mu      sync.Mutex
	orphans []orphan
}

type orphan struct {
	key, token string
	at         time.Time
}

// maxOrphans bounds the list; past it the oldest are left to expire.
const maxOrphans = 100_000

func newClaims() *claims {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &claims{prefix: hex.EncodeToString(b) + "-"}
}

// token returns a value no other claim of any producer carries.
func (c *claims) token() string {
	return c.prefix + strconv.FormatUint(c.seq.Add(1), 36)
}

// lost records claims that may be held in Redis with nobody to release
// them.
func (c *claims) lost(list []orphan) {
	if len(list) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.orphans = append(c.orphans, list...)
	if over := len(c.orphans) - maxOrphans; over > 0 {
		c.orphans = append(c.orphans[:0:0], c.orphans[over:]...)
	}
}

// take hands over the orphans younger than claimTTL (older ones have
// expired in Redis), emptying the list.
func (c *claims) take(now time.Time) []orphan {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.orphans) == 0 {
		return nil
	}
	out := c.orphans[:0:0]
	for _, o := range c.orphans {
		if now.Sub(o.at) < claimTTL {
			out = append(out, o)
		}
	}
	c.orphans = nil
	return out
}

// releaseScript deletes a claim only while it holds the caller's token.
var releaseScript = goredis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`)

// releaseOrphans deletes the claims this store lost track of; those it
// cannot release now (Redis still away) are kept for the next call.
func (s *Store) releaseOrphans(ctx context.Context) {
	list := s.claims.take(time.Now())
	if len(list) == 0 {
		return
	}
	pipe := s.client.Pipeline()
	cmds := make([]*goredis.Cmd, len(list))
	for i, o := range list {
		cmds[i] = releaseScript.Eval(ctx, pipe, []string{o.key}, o.token)
	}
	if err := execPipeline(ctx, pipe); err != nil {
		// A broken pipeline need not mark its commands failed; a release
		// repeated is harmless, so keep them all.
		s.claims.lost(list)
		return
	}
	var keep []orphan
	for i, c := range cmds {
		if c.Err() != nil && !errors.Is(c.Err(), goredis.Nil) {
			keep = append(keep, list[i]) // refused (LOADING, say): try again
		}
	}
	s.claims.lost(keep)
}
