package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// produceScript is one MQTT message's writes as one atomic step and one
// round trip: pipelining the three commands instead cost about 50 µs of CPU
// each unpipelined, and a script also closes the window in which a crash
// between the append and the de-duplication mark could lose or double a
// message.
//
// KEYS[1] the de-duplication key (KEYS[2] again when there is none); KEYS[2]
// the stream. ARGV[1] the mark: "none", "key" (the whole key) or "bit" (bit
// ARGV[3] of the bitmap KEYS[1]); ARGV[2] the mark's TTL in ms; ARGV[4]
// maxLen (0: none); ARGV[5] the channel ("" for none); ARGV[6] the payload;
// ARGV[7] the number of entries; then per entry its number of fields and
// its field/value pairs. Returns {"dup"} or the new ids.
var produceScript = goredis.NewScript(`
local mark = ARGV[1]
if mark == 'key' and redis.call('EXISTS', KEYS[1]) == 1 then
  return {'dup'}
end
if mark == 'bit' and redis.call('GETBIT', KEYS[1], ARGV[3]) == 1 then
  return {'dup'}
end
local maxlen = tonumber(ARGV[4])
local n = tonumber(ARGV[7])
if maxlen > 0 and redis.call('XLEN', KEYS[2]) + n > maxlen then
  return redis.error_reply('STREAMFULL stream is at its maximum length')
end
local ids = {}
local i = 8
for e = 1, n do
  local fields = tonumber(ARGV[i])
  ids[e] = redis.call('XADD', KEYS[2], '*', unpack(ARGV, i + 1, i + 2 * fields))
  i = i + 1 + 2 * fields
end
if mark == 'key' then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[2])
elseif mark == 'bit' then
  redis.call('SETBIT', KEYS[1], ARGV[3], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if ARGV[5] ~= '' then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return ids
`)

// markKind names the request's de-duplication mark as produceScript's
// ARGV[1] does.
func markKind(req streamstore.ProduceRequest) string {
	switch {
	case req.DedupKey == "":
		return "none"
	case req.DedupBitmap:
		return "bit"
	}
	return "key"
}

// Produce runs the Cloud API's per-message writes; see streamstore.Store.
// On one server or Sentinel it is one atomic script. On Cluster the key and
// the stream hash to different slots, which a script may not touch
// together, so the steps run in order: EXISTS (or GETBIT), the append, then
// SET (or SETBIT and PEXPIRE) and PUBLISH in one pipeline.
func (s *Store) Produce(ctx context.Context, req streamstore.ProduceRequest) (streamstore.ProduceResult, error) {
	if err := checkProduce(req); err != nil {
		return streamstore.ProduceResult{}, err
	}
	if s.opts.isCluster() {
		return s.produceInSteps(ctx, req, produceTTL(req))
	}
	keys, args := produceArgs(req)
	res, err := produceScript.Run(ctx, s.client, keys, args...).StringSlice()
	return s.produceResult(ctx, req, res, err)
}

// ProduceBatch runs Produce for each request; see streamstore.Store. On one
// server or Sentinel every request is one EVALSHA in a single pipeline: the
// server runs them in order, each atomic, so a request sees the marks of
// the ones before it. On Cluster, where the steps of one request already
// go to different slots, the requests run one after the other.
//
// A command that found the script missing from the server's cache (after a
// restart, a failover or SCRIPT FLUSH) did not run, so it is retried on its
// own with Run, which loads the script: that cannot append twice. Should
// another client load the script while the pipeline is being executed, a
// later request may have run before such a retry; copies of one message
// still append once, but the later copy is the one appended.
func (s *Store) ProduceBatch(ctx context.Context, reqs []streamstore.ProduceRequest) ([]streamstore.ProduceResult, []error) {
	if s.opts.isCluster() {
		return s.produceBatchInSteps(ctx, reqs)
	}
	results, errs := make([]streamstore.ProduceResult, len(reqs)), make([]error, len(reqs))
	type call struct {
		keys []string
		args []any
		cmd  *goredis.Cmd
	}
	calls := make([]call, len(reqs))
	pipe := s.client.Pipeline()
	for i, req := range reqs {
		if errs[i] = checkProduce(req); errs[i] != nil {
			continue
		}
		c := &calls[i]
		c.keys, c.args = produceArgs(req)
		c.cmd = produceScript.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	if pipe.Len() == 0 {
		return results, errs
	}
	// Exec reports the first failed command; every command carries its own
	// error, a connection failure included.
	_, _ = pipe.Exec(ctx)
	for i, c := range calls {
		if c.cmd == nil {
			continue
		}
		cmd := c.cmd
		if goredis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			cmd = produceScript.Run(ctx, s.client, c.keys, c.args...)
		}
		res, err := cmd.StringSlice()
		results[i], errs[i] = s.produceResult(ctx, reqs[i], res, err)
	}
	return results, errs
}

// produceBatchInSteps is ProduceBatch on Cluster: Produce's steps, request
// after request, so each sees the marks of the ones before it.
func (s *Store) produceBatchInSteps(ctx context.Context, reqs []streamstore.ProduceRequest) ([]streamstore.ProduceResult, []error) {
	results, errs := make([]streamstore.ProduceResult, len(reqs)), make([]error, len(reqs))
	for i, req := range reqs {
		if errs[i] = checkProduce(req); errs[i] == nil {
			results[i], errs[i] = s.produceInSteps(ctx, req, produceTTL(req))
		}
	}
	return results, errs
}

// checkProduce refuses a request before any I/O: Redis would take an
// entry without fields for a malformed XADD only halfway through the
// script, after the entries before it were appended.
func checkProduce(req streamstore.ProduceRequest) error {
	for _, values := range req.Entries {
		if len(values) == 0 {
			return fmt.Errorf("produce %s: an entry needs at least one field", req.Stream)
		}
	}
	return nil
}

// produceTTL is the mark's TTL in ms: PX and PEXPIRE refuse 0.
func produceTTL(req streamstore.ProduceRequest) int64 {
	return max(req.DedupTTL, time.Millisecond).Milliseconds()
}

// produceArgs builds produceScript's KEYS and ARGV for a checked request.
func produceArgs(req streamstore.ProduceRequest) (keys []string, args []any) {
	mark, key := markKind(req), req.Stream
	if mark != "none" {
		key = req.DedupKey
	}
	args = make([]any, 0, 7+len(req.Entries)*9)
	args = append(args, mark, produceTTL(req), req.DedupBit, max(req.MaxLen, 0), req.Channel, req.Payload, len(req.Entries))
	for _, values := range req.Entries {
		args = append(args, len(values))
		for k, v := range values {
			args = append(args, k, v)
		}
	}
	return []string{key, req.Stream}, args
}

// produceResult turns produceScript's reply into Produce's result; err is
// the command's, mapped by wrap (STREAMFULL to ErrStreamFull).
func (s *Store) produceResult(ctx context.Context, req streamstore.ProduceRequest, res []string, err error) (streamstore.ProduceResult, error) {
	if err != nil {
		return streamstore.ProduceResult{}, s.wrap(ctx, "produce", req.Stream, err)
	}
	if len(res) == 1 && res[0] == "dup" {
		return streamstore.ProduceResult{Duplicate: true}, nil
	}
	if len(res) != len(req.Entries) {
		return streamstore.ProduceResult{}, fmt.Errorf("produce %s: BUG: %d ids for %d entries", req.Stream, len(res), len(req.Entries))
	}
	return streamstore.ProduceResult{IDs: res}, nil
}

func (s *Store) produceInSteps(ctx context.Context, req streamstore.ProduceRequest, ttlMS int64) (streamstore.ProduceResult, error) {
	mark := markKind(req)
	switch mark {
	case "key":
		n, err := s.client.Exists(ctx, req.DedupKey).Result()
		if err != nil {
			return streamstore.ProduceResult{}, s.wrap(ctx, "produce exists", req.DedupKey, err)
		}
		if n == 1 {
			return streamstore.ProduceResult{Duplicate: true}, nil
		}
	case "bit":
		n, err := s.client.GetBit(ctx, req.DedupKey, int64(req.DedupBit)).Result()
		if err != nil {
			return streamstore.ProduceResult{}, s.wrap(ctx, "produce getbit", req.DedupKey, err)
		}
		if n == 1 {
			return streamstore.ProduceResult{Duplicate: true}, nil
		}
	}
	var ids []string
	if len(req.Entries) > 0 {
		var err error
		if ids, err = s.AddBatch(ctx, req.Stream, req.Entries, req.MaxLen); err != nil {
			return streamstore.ProduceResult{}, fmt.Errorf("produce: %w", err)
		}
	}
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		ttl := time.Duration(ttlMS) * time.Millisecond
		switch mark {
		case "key":
			p.Set(ctx, req.DedupKey, "1", ttl)
		case "bit":
			p.SetBit(ctx, req.DedupKey, int64(req.DedupBit), 1)
			p.PExpire(ctx, req.DedupKey, ttl)
		}
		if req.Channel != "" {
			p.Publish(ctx, req.Channel, req.Payload)
		}
		return nil
	})
	if err != nil {
		return streamstore.ProduceResult{IDs: ids}, s.wrap(ctx, "produce set/publish", req.Stream, err)
	}
	return streamstore.ProduceResult{IDs: ids}, nil
}
