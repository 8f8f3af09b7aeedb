package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// addScript appends a batch of entries, refusing the whole batch when it
// would take the stream past maxLen. A script runs without interleaving, so
// no other producer can slip an entry in between the check and the XADDs.
// Redis checks maxmemory before a script's first write only, so an OOM
// refusal is also all or nothing.
//
// KEYS[1] the stream; ARGV[1] maxLen (0: none); ARGV[2] the number of
// entries; then per entry its number of fields and its field/value pairs.
var addScript = goredis.NewScript(`
local maxlen = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
if maxlen > 0 and redis.call('XLEN', KEYS[1]) + n > maxlen then
  return redis.error_reply('STREAMFULL stream is at its maximum length')
end
local ids = {}
local i = 3
for e = 1, n do
  local fields = tonumber(ARGV[i])
  ids[e] = redis.call('XADD', KEYS[1], '*', unpack(ARGV, i + 1, i + 2 * fields))
  i = i + 1 + 2 * fields
end
return ids
`)

// Add appends one entry; see streamstore.Store. Without maxLen it is a
// plain XADD.
func (s *Store) Add(ctx context.Context, stream string, values map[string]string, maxLen int64) (string, error) {
	if len(values) == 0 {
		return "", fmt.Errorf("xadd %s: an entry needs at least one field", stream)
	}
	if maxLen > 0 {
		ids, err := s.AddBatch(ctx, stream, []map[string]string{values}, maxLen)
		if err != nil {
			return "", err
		}
		return ids[0], nil
	}
	var add *goredis.StringCmd
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		add = p.XAdd(ctx, &goredis.XAddArgs{Stream: s.wireKey(stream), Values: values})
		s.queueRegister(ctx, p, stream)
		return nil
	})
	// The entry is in once XADD answered with its id, whatever became of
	// the registration, which the stream's next write repeats. A pipeline
	// that failed as a whole may leave XADD without an error of its own.
	if add.Val() == "" {
		if add.Err() != nil {
			err = add.Err()
		}
		return "", s.wrap(ctx, "xadd", stream, err)
	}
	return add.Val(), nil
}

// AddBatch appends entries in one script call, all or nothing; see
// streamstore.Store.
func (s *Store) AddBatch(ctx context.Context, stream string, batch []map[string]string, maxLen int64) ([]string, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	n := 2
	for _, values := range batch {
		if len(values) == 0 {
			return nil, fmt.Errorf("xadd %s: an entry needs at least one field", stream)
		}
		n += 1 + 2*len(values)
	}
	args := make([]any, 0, n)
	args = append(args, max(maxLen, 0), len(batch))
	for _, values := range batch {
		args = append(args, len(values))
		for k, v := range values {
			args = append(args, k, v)
		}
	}
	res, err := addScript.Run(ctx, s.client, []string{s.wireKey(stream)}, args...).StringSlice()
	if err != nil {
		return nil, s.wrap(ctx, "xadd", stream, err)
	}
	if len(res) != len(batch) {
		return nil, fmt.Errorf("xadd %s: BUG: %d ids for %d entries", stream, len(res), len(batch))
	}
	// The entries are in: failing now would have them appended again. The
	// stream's next write repeats the registration.
	s.register(ctx, []string{stream})
	return res, nil
}

// EnsureGroup runs XGROUP CREATE ... MKSTREAM; an existing group
// (BUSYGROUP) is success. See streamstore.Store.
func (s *Store) EnsureGroup(ctx context.Context, stream, group, startID string) error {
	if startID == "" {
		startID = "0"
	}
	var create *goredis.StatusCmd
	_, perr := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		create = p.XGroupCreateMkStream(ctx, s.wireKey(stream), group, startID)
		s.queueRegister(ctx, p, stream)
		return nil
	})
	// The group's outcome is XGROUP's reply; the pipeline's error counts
	// only when XGROUP got none (the pipeline failed as a whole).
	err := create.Err()
	if err == nil && create.Val() == "" {
		err = perr
	}
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return s.wrap(ctx, "xgroup create", stream+" "+group, err)
	}
	return nil
}

// ReadGroup runs XREADGROUP ">" in slices of at most BlockSlice; see
// streamstore.Store and the package comment.
func (s *Store) ReadGroup(ctx context.Context, stream, group, consumer string, count int, block time.Duration) ([]streamstore.Entry, error) {
	if count <= 0 {
		count = streamstore.DefaultCount
	}
	if block < time.Millisecond {
		block = 0 // BLOCK takes milliseconds, and BLOCK 0 means forever
	}
	end := time.Now().Add(block)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("xreadgroup %s: %w", stream, err)
		}
		wait := time.Duration(-1) // no BLOCK
		nearDeadline := false
		if block > 0 {
			wait = min(time.Until(end), s.opts.BlockSlice)
			if dl, ok := ctx.Deadline(); ok {
				// Leave the server time to answer before ctx's deadline
				// closes the connection under the reply.
				wait = min(wait, time.Until(dl)-deadlineMargin)
			}
			wait = wait.Truncate(time.Millisecond)
			if wait < time.Millisecond {
				wait, nearDeadline = -1, true
			}
		}
		res, err := s.client.XReadGroup(ctx, &goredis.XReadGroupArgs{
			Group: group, Consumer: consumer, Streams: []string{s.wireKey(stream), ">"}, Count: int64(count), Block: wait,
		}).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return nil, s.wrap(ctx, "xreadgroup", stream, err)
		}
		if len(res) > 0 && len(res[0].Messages) > 0 {
			return entries(res[0].Messages), nil
		}
		left := time.Until(end)
		if block == 0 || left <= 0 {
			return nil, nil
		}
		if nearDeadline {
			// Too close to ctx's deadline for another blocking call: wait
			// it out without one.
			t := time.NewTimer(left)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("xreadgroup %s: %w", stream, ctx.Err())
			case <-t.C:
				return nil, nil
			}
		}
	}
}

func entries(msgs []goredis.XMessage) []streamstore.Entry {
	out := make([]streamstore.Entry, len(msgs))
	for i, m := range msgs {
		values := make(map[string]string, len(m.Values))
		for k, v := range m.Values {
			values[k], _ = v.(string)
		}
		out[i] = streamstore.Entry{ID: m.ID, Values: values}
	}
	return out
}

// Ack runs XACK; see streamstore.Store.
func (s *Store) Ack(ctx context.Context, stream, group string, ids ...string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := s.client.XAck(ctx, s.wireKey(stream), group, ids...).Result()
	if err != nil {
		return 0, s.wrap(ctx, "xack", stream, err)
	}
	return n, nil
}

// AutoClaim runs XAUTOCLAIM; the ids of trimmed entries it drops from the
// PEL (Redis 7's third reply element) are not returned. See
// streamstore.Store.
func (s *Store) AutoClaim(ctx context.Context, stream, group, consumer string, minIdle time.Duration, start string, count int) ([]streamstore.Entry, string, error) {
	if count <= 0 {
		count = streamstore.DefaultCount
	}
	msgs, next, err := s.client.XAutoClaim(ctx, &goredis.XAutoClaimArgs{
		Stream: s.wireKey(stream), Group: group, Consumer: consumer, MinIdle: max(minIdle, 0), Start: start, Count: int64(count),
	}).Result()
	if err != nil {
		return nil, "", s.wrap(ctx, "xautoclaim", stream, err)
	}
	return entries(msgs), next, nil
}

// PendingEntries runs XPENDING's extended form over the whole PEL; see
// streamstore.Store.
func (s *Store) PendingEntries(ctx context.Context, stream, group string, count int) ([]streamstore.PendingEntry, error) {
	if count <= 0 {
		count = streamstore.DefaultCount
	}
	res, err := s.client.XPendingExt(ctx, &goredis.XPendingExtArgs{
		Stream: s.wireKey(stream), Group: group, Start: "-", End: "+", Count: int64(count),
	}).Result()
	if err != nil {
		return nil, s.wrap(ctx, "xpending", stream, err)
	}
	out := make([]streamstore.PendingEntry, len(res))
	for i, p := range res {
		out[i] = streamstore.PendingEntry{ID: p.ID, Consumer: p.Consumer, Idle: p.Idle, Deliveries: p.RetryCount}
	}
	return out, nil
}

// Group reads XINFO GROUPS; see streamstore.Store. It parses the raw reply
// because go-redis turns an unknown (nil) lag into 0, which would read as
// "caught up".
func (s *Store) Group(ctx context.Context, stream, group string) (streamstore.GroupInfo, error) {
	res, err := xinfoGroups(ctx, s.client, s.wireKey(stream)).Result()
	if err != nil {
		return streamstore.GroupInfo{}, s.wrap(ctx, "xinfo groups", stream, err)
	}
	info, err := findGroup(res, group)
	if err != nil {
		return streamstore.GroupInfo{}, fmt.Errorf("xinfo groups %s: %w", stream, err)
	}
	return info, nil
}

// xinfoGroups queues or runs XINFO GROUPS key. go-redis routes a command
// it has no key position for by its second word, for XINFO "groups": on
// Cluster a single command was then redirected to the stream's master, and
// in SafeTrimID's transaction it ran apart from XPENDING, so the two reads
// were no snapshot, and not even in order (trimming an entry delivered
// between them).
func xinfoGroups(ctx context.Context, c interface {
	Process(context.Context, goredis.Cmder) error
}, key string) *goredis.Cmd {
	cmd := goredis.NewCmd(ctx, "xinfo", "groups", key)
	cmd.SetFirstKeyPos(2)
	_ = c.Process(ctx, cmd)
	return cmd
}

// findGroup picks group out of an XINFO GROUPS reply: a list of maps
// (RESP3) or of flat field/value lists (RESP2).
func findGroup(reply any, group string) (streamstore.GroupInfo, error) {
	list, ok := reply.([]any)
	if !ok {
		return streamstore.GroupInfo{}, fmt.Errorf("unexpected reply %T", reply)
	}
	for _, item := range list {
		fields := map[string]any{}
		switch g := item.(type) {
		case map[any]any:
			for k, v := range g {
				ks, _ := k.(string)
				fields[ks] = v
			}
		case []any:
			for i := 0; i+1 < len(g); i += 2 {
				ks, _ := g[i].(string)
				fields[ks] = g[i+1]
			}
		default:
			return streamstore.GroupInfo{}, fmt.Errorf("unexpected group entry %T", item)
		}
		if name, _ := fields["name"].(string); name != group {
			continue
		}
		info := streamstore.GroupInfo{Name: group, Lag: -1}
		info.LastDeliveredID, _ = fields["last-delivered-id"].(string)
		info.Pending, _ = fields["pending"].(int64)
		if lag, ok := fields["lag"].(int64); ok {
			info.Lag = lag
		}
		return info, nil
	}
	return streamstore.GroupInfo{}, fmt.Errorf("group %s: %w", group, streamstore.ErrNoGroup)
}

// TrimMinID runs XTRIM MINID, exactly; see streamstore.Store.
func (s *Store) TrimMinID(ctx context.Context, stream, minID string) (int64, error) {
	n, err := s.client.XTrimMinID(ctx, s.wireKey(stream), minID).Result()
	if err != nil {
		return 0, s.wrap(ctx, "xtrim", stream, err)
	}
	return n, nil
}

// SafeTrimID reads the group's last-delivered id and then its oldest
// pending id in one MULTI/EXEC. The transaction makes the two a snapshot;
// the order would keep it safe even without: entries at or below the
// last-delivered id join the PEL only by being delivered, which already
// happened, so a PEL read after it cannot miss one. See streamstore.Store.
func (s *Store) SafeTrimID(ctx context.Context, stream, group string) (string, error) {
	var groups *goredis.Cmd
	var pending *goredis.XPendingCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		groups = xinfoGroups(ctx, p, s.wireKey(stream))
		pending = p.XPending(ctx, s.wireKey(stream), group)
		return nil
	})
	if err != nil {
		return "", s.wrap(ctx, "safe trim id", stream, err)
	}
	info, err := findGroup(groups.Val(), group)
	if err != nil {
		return "", fmt.Errorf("safe trim id %s: %w", stream, err)
	}
	last, err := streamstore.ParseID(info.LastDeliveredID)
	if err != nil {
		return "", fmt.Errorf("safe trim id %s: last-delivered-id: %w", stream, err)
	}
	safe := last.Next()
	if p := pending.Val(); p.Count > 0 {
		oldest, err := streamstore.ParseID(p.Lower)
		if err != nil {
			return "", fmt.Errorf("safe trim id %s: oldest pending: %w", stream, err)
		}
		if oldest.Compare(safe) < 0 {
			safe = oldest
		}
	}
	return safe.String(), nil
}

// Len runs XLEN; see streamstore.Store.
func (s *Store) Len(ctx context.Context, stream string) (int64, error) {
	n, err := s.client.XLen(ctx, s.wireKey(stream)).Result()
	if err != nil {
		return 0, s.wrap(ctx, "xlen", stream, err)
	}
	return n, nil
}

// Range runs XRANGE with COUNT; see streamstore.Store.
func (s *Store) Range(ctx context.Context, stream, start, end string, count int) ([]streamstore.Entry, error) {
	if count <= 0 {
		count = streamstore.DefaultCount
	}
	msgs, err := s.client.XRangeN(ctx, s.wireKey(stream), start, end, int64(count)).Result()
	if err != nil {
		return nil, s.wrap(ctx, "xrange", stream, err)
	}
	return entries(msgs), nil
}

// scanCount is SCAN's and SSCAN's COUNT hint: elements examined per call,
// not returned.
const scanCount = 1000

// registryKey is the set of the streams this store writes: every append
// and every EnsureGroup adds its stream, after the write, and Delete takes
// it out. Streams reads it instead of scanning the keyspace, which holds a
// de-duplication key per message in the last day (hundreds of millions at
// a few thousand messages a second): a SCAN of it every few seconds cost
// Redis far more than the streams it found.
//
// On Cluster the registry is split into sets of their own slots; see
// registryShards.
//
// adoptedKey says that the keyspace was scanned once for streams older than
// the registry (written before it existed) and they were added.
const (
	registryKey = "edgeplat:streams"
	adoptedKey  = "edgeplat:streams:adopted"
)

// Streams returns the registered streams matching pattern (SSCAN MATCH of
// each registry set), dropping from the registry the members no longer
// there (deleted other than through Delete). The first call on a server
// whose keyspace was never scanned for older streams scans it once, SCAN
// MATCH * TYPE stream (never KEYS, which blocks the server; on Cluster on
// every master), and adds them. See streamstore.Store.
func (s *Store) Streams(ctx context.Context, pattern string) ([]string, error) {
	if err := s.adoptStreams(ctx); err != nil {
		return nil, err
	}
	if pattern == "" {
		pattern = "*"
	}
	var members []string
	for _, set := range s.registries() {
		var cursor uint64
		for {
			keys, next, err := s.client.SScan(ctx, set, cursor, pattern, scanCount).Result()
			if err != nil {
				return nil, s.wrap(ctx, "sscan", set, err)
			}
			members = append(members, keys...)
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	slices.Sort(members)
	members = slices.Compact(members) // SSCAN may return a member twice
	if len(members) == 0 {
		return nil, nil
	}
	types := make([]*goredis.StatusCmd, len(members))
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, m := range members {
			types[i] = p.Type(ctx, s.wireKey(m))
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap(ctx, "type", pattern, err)
	}
	out := make([]string, 0, len(members))
	var gone []string
	for i, m := range members {
		switch types[i].Val() {
		case "stream":
			out = append(out, m)
		case "none":
			gone = append(gone, m)
		}
	}
	// A stream recreated since is registered again by its next write.
	for set, members := range s.byRegistry(gone) {
		if err := s.client.SRem(ctx, set, members...).Err(); err != nil {
			return nil, s.wrap(ctx, "srem", set, err)
		}
	}
	return out, nil
}

// queueRegister queues stream's registration on p.
func (s *Store) queueRegister(ctx context.Context, p goredis.Pipeliner, stream string) {
	p.SAdd(ctx, s.registryOf(stream), s.nameOf(s.wireKey(stream)))
}

// adoptStreams adds the streams already in the keyspace to the registry,
// once per server (a flushed or restarted one without persistence scans
// again, and finds little). Two processes starting together may both
// scan; adding twice is harmless.
func (s *Store) adoptStreams(ctx context.Context) error {
	n, err := s.client.Exists(ctx, adoptedKey).Result()
	if err != nil {
		return s.wrap(ctx, "exists", adoptedKey, err)
	}
	if n == 1 {
		return nil
	}
	var mu sync.Mutex
	var found []string
	scan := func(ctx context.Context, c goredis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.ScanType(ctx, cursor, "*", scanCount, "stream").Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				found = append(found, s.nameOf(k))
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	if cluster, ok := s.client.(*goredis.ClusterClient); ok {
		err = cluster.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.client)
	}
	if err != nil {
		return s.wrap(ctx, "scan", "streams", err)
	}
	for set, members := range s.byRegistry(found) {
		for chunk := range slices.Chunk(members, scanCount) {
			if err := s.client.SAdd(ctx, set, chunk...).Err(); err != nil {
				return s.wrap(ctx, "sadd", set, err)
			}
		}
	}
	if err := s.client.Set(ctx, adoptedKey, "1", 0).Err(); err != nil {
		return s.wrap(ctx, "set", adoptedKey, err)
	}
	return nil
}

// Delete runs one DEL per key in a pipeline (keys of one DEL must share a
// slot on Cluster); see streamstore.Store.
func (s *Store) Delete(ctx context.Context, keys ...string) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	dels := make([]*goredis.IntCmd, len(keys))
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, k := range keys {
			dels[i] = p.Del(ctx, s.wireKey(k))
		}
		for set, members := range s.byRegistry(keys) {
			p.SRem(ctx, set, members...)
		}
		return nil
	})
	if err != nil {
		return 0, s.wrap(ctx, "del", strconv.Itoa(len(keys))+" keys", err)
	}
	var n int64
	for _, c := range dels {
		n += c.Val()
	}
	return n, nil
}

// SetNX runs SET key value NX PX ttl; see streamstore.Store.
func (s *Store) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	ok, err := s.client.SetNX(ctx, s.wireKey(key), value, max(ttl, 0)).Result()
	if err != nil {
		return false, s.wrap(ctx, "set nx", key, err)
	}
	return ok, nil
}
