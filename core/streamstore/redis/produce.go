package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// markKind names the request's de-duplication mark: "none", "key" (the
// whole key) or "bit" (one bit of a bitmap).
func markKind(req streamstore.ProduceRequest) string {
	switch {
	case req.DedupKey == "":
		return "none"
	case req.DedupBitmap:
		return "bit"
	}
	return "key"
}

// Produce runs the Cloud API's per-message writes; see streamstore.Store
// and ProduceBatch, which it is for one request.
func (s *Store) Produce(ctx context.Context, req streamstore.ProduceRequest) (streamstore.ProduceResult, error) {
	if err := checkProduce(req); err != nil {
		return streamstore.ProduceResult{}, err
	}
	results, errs := s.ProduceBatch(ctx, []streamstore.ProduceRequest{req})
	return results[0], errs[0]
}

// claimTTL bounds how long a producer that died between claiming a message
// and appending it keeps other copies of the message out (they are refused
// with ErrCopyInFlight meanwhile, and retried).
const claimTTL = 30 * time.Second

// ProduceBatch runs Produce for each request; see streamstore.Store. On one
// server or Sentinel it takes two round trips for the whole batch:
//
//  1. one pipeline reads every request's mark (EXISTS or GETBIT), claims
//     each mark for this producer (SET NX of a claim key next to it, which
//     expires after claimTTL), and reads the length of every stream the
//     batch appends to;
//  2. one pipeline holds, for every request that is no repeat, whose claim
//     this producer holds and that fits under its MaxLen, a MULTI/EXEC
//     transaction of its XADDs, its mark (SET, or SETBIT and PEXPIRE), its
//     PUBLISH and the claim's removal.
//
// A request sees the marks and appends of the requests before it in the
// batch, so copies of one message in one batch append once. The mark is
// written in the same transaction as the append and never without it. The
// claim makes copies of one message produced by two clients at the same
// instant append once too: the one that does not hold the claim gets
// ErrCopyInFlight and retries, by which time the copy that holds it is
// either appended (a repeat) or gone with its claim. Producers appending
// to one stream at the same time may take it past MaxLen by what they
// have in flight; it is never trimmed, so nothing is lost.
//
// A Lua script did all of this in one atomic step before and cost Redis
// 30-40 µs per telemetry message on top of its commands (it copies every
// argument into Lua and back, some 7 KB for 50 readings); the transactions
// and claims cost a few µs.
//
// On Cluster the same two round trips run on each master for the requests
// whose keys live there, masters in parallel; see produceBatchCluster.
func (s *Store) ProduceBatch(ctx context.Context, reqs []streamstore.ProduceRequest) ([]streamstore.ProduceResult, []error) {
	s.releaseOrphans(ctx)
	if cluster, ok := s.client.(*goredis.ClusterClient); ok {
		return s.produceBatchCluster(ctx, cluster, reqs)
	}
	results, errs, _ := s.produceOn(ctx, s.client, reqs, true)
	return results, errs
}

// pipeliner is a client that pipelines: one server, or one master of a
// Cluster.
type pipeliner interface {
	Pipeline() goredis.Pipeliner
}

// produceOn runs ProduceBatch's two round trips on c, which holds every
// key of reqs. With register, the second adds the streams appended to the
// registry; either way it returns them (their keys) for a caller that
// registers them itself.
func (s *Store) produceOn(ctx context.Context, c pipeliner, reqs []streamstore.ProduceRequest, register bool) ([]streamstore.ProduceResult, []error, []string) {
	results, errs := make([]streamstore.ProduceResult, len(reqs)), make([]error, len(reqs))

	// Step 1: marks, claims and stream lengths. XLEN also tells a stream
	// key that holds something else (WRONGTYPE) before anything is written.
	type mark struct {
		key string
		bit int32 // -1 for a whole-key mark
	}
	type markState struct {
		claimKey, token string
		claim           *goredis.BoolCmd
		appender        int // the request appending under the mark, or -1
		release         *goredis.IntCmd
	}
	marks := make(map[mark]*markState)
	ofReq := make([]*markState, len(reqs))
	checks := make([]*goredis.IntCmd, len(reqs))
	lengths := make(map[string]*goredis.IntCmd)
	pipe := c.Pipeline()
	for i, req := range reqs {
		if errs[i] = checkProduce(req); errs[i] != nil {
			continue
		}
		if lengths[req.Stream] == nil {
			lengths[req.Stream] = pipe.XLen(ctx, req.Stream)
		}
		m := mark{req.DedupKey, -1}
		switch markKind(req) {
		case "none":
			continue
		case "key":
			checks[i] = pipe.Exists(ctx, req.DedupKey)
		case "bit":
			checks[i] = pipe.GetBit(ctx, req.DedupKey, int64(req.DedupBit))
			m.bit = int32(req.DedupBit)
		}
		st := marks[m]
		if st == nil {
			st = &markState{claimKey: claimKey(req), token: s.claims.token(), appender: -1}
			st.claim = pipe.SetNX(ctx, st.claimKey, st.token, claimTTL)
			marks[m] = st
		}
		ofReq[i] = st
	}
	if pipe.Len() == 0 {
		return results, errs, nil
	}
	if err := execPipeline(ctx, pipe); err != nil {
		// The claims may have been taken before the connection broke,
		// even when the error is a failed dial: go-redis retries a broken
		// pipeline and returns the last attempt's error.
		var lost []orphan
		for _, st := range marks {
			lost = append(lost, orphan{key: st.claimKey, token: st.token, at: time.Now()})
		}
		s.claims.lost(lost)
		results, errs = failAll(results, errs, s.wrap(ctx, "produce", reqs[0].Stream, err))
		return results, errs, nil
	}
	if s.afterClaims != nil {
		s.afterClaims()
	}
	// held lists the claims this call took and did not see released, for
	// the next call to release: after the second round trip fails, or its
	// transaction or release is refused, nothing else would before they
	// expire.
	held := func(released func(*markState) bool) {
		var lost []orphan
		for _, st := range marks {
			if st.claim.Err() == nil && st.claim.Val() && !released(st) {
				lost = append(lost, orphan{key: st.claimKey, token: st.token, at: time.Now()})
			}
		}
		s.claims.lost(lost)
	}

	// Step 2: one transaction per request to append.
	copyOf := make([]int, len(reqs))
	length := make(map[string]int64, len(lengths))
	execs := make([]*goredis.Cmd, len(reqs))
	pipe = c.Pipeline()
	for i, req := range reqs {
		copyOf[i] = -1
		if errs[i] != nil {
			continue
		}
		if c := lengths[req.Stream]; c.Err() != nil {
			errs[i] = s.wrap(ctx, "produce", req.Stream, c.Err())
			continue
		}
		st := ofReq[i]
		if st != nil {
			err := checks[i].Err()
			if err == nil {
				err = st.claim.Err()
			}
			if err != nil {
				errs[i] = s.wrap(ctx, "produce", req.DedupKey, err)
				continue
			}
			switch {
			case checks[i].Val() == 1:
				results[i].Duplicate = true
				continue
			case st.appender >= 0:
				copyOf[i] = st.appender
				continue
			case !st.claim.Val():
				errs[i] = fmt.Errorf("produce %s: %w", req.DedupKey, streamstore.ErrCopyInFlight)
				continue
			}
		}
		n, ok := length[req.Stream]
		if !ok {
			n = lengths[req.Stream].Val()
		}
		if req.MaxLen > 0 && n+int64(len(req.Entries)) > req.MaxLen {
			// The claim stays with the batch: a later copy may fit.
			errs[i] = fmt.Errorf("produce %s: %w", req.Stream, streamstore.ErrStreamFull)
			continue
		}
		length[req.Stream] = n + int64(len(req.Entries))
		claim := ""
		if st != nil {
			st.appender, claim = i, st.claimKey
		}
		execs[i] = queueProduce(ctx, pipe, req, claim)
	}
	for _, st := range marks {
		if st.appender < 0 && st.claim.Err() == nil && st.claim.Val() {
			st.release = pipe.Del(ctx, st.claimKey) // claimed, but nothing appended under it
		}
	}
	appended := appendedStreams(reqs, execs)
	if register && len(appended) > 0 {
		members := make([]any, len(appended))
		for i, a := range appended {
			members[i] = a
		}
		pipe.SAdd(ctx, registryKey, members...) // after the appends; see registryKey
	}
	if pipe.Len() > 0 {
		if err := execPipeline(ctx, pipe); err != nil {
			// The transactions may have run: a retry finds their marks.
			held(func(*markState) bool { return false })
			results, errs = failAll(results, errs, s.wrap(ctx, "produce", reqs[0].Stream, err))
			return results, errs, appended
		}
	}
	held(func(st *markState) bool {
		if st.appender >= 0 {
			return execs[st.appender].Err() == nil // the transaction ran, with its DEL
		}
		return st.release != nil && st.release.Err() == nil
	})
	for i, c := range execs {
		if c != nil {
			results[i], errs[i] = s.produceResult(ctx, reqs[i], c)
		}
	}
	for i, j := range copyOf {
		if j >= 0 {
			// A later copy of a message this batch appended is a repeat of
			// it; of one that failed, it fails alike and is left for the
			// caller to retry.
			if errs[j] == nil {
				results[i].Duplicate = true
			} else {
				errs[i] = errs[j]
			}
		}
	}
	return results, errs, appended
}

// execPipeline runs pipe and returns the error that failed it as a whole:
// no connection, a connection lost, the end of ctx. The commands of such a
// pipeline need not carry the error themselves (a dial that fails leaves
// them untouched). Errors Redis answered to single commands stay with
// those commands.
func execPipeline(ctx context.Context, pipe goredis.Pipeliner) error {
	_, err := pipe.Exec(ctx)
	var answered goredis.Error
	if err == nil || errors.As(err, &answered) && ctx.Err() == nil {
		return nil
	}
	return err
}

// appendedStreams lists, once each, the streams of the requests with a
// transaction queued.
func appendedStreams(reqs []streamstore.ProduceRequest, execs []*goredis.Cmd) []string {
	var out []string
	for i, c := range execs {
		if c != nil && !slices.Contains(out, reqs[i].Stream) {
			out = append(out, reqs[i].Stream)
		}
	}
	return out
}

// failAll gives err to every request not failed already.
func failAll(results []streamstore.ProduceResult, errs []error, err error) ([]streamstore.ProduceResult, []error) {
	for i := range errs {
		if errs[i] == nil {
			results[i], errs[i] = streamstore.ProduceResult{}, err
		}
	}
	return results, errs
}

// claimKey names the claim of req's mark: the mark's key, and its bit for a
// bitmap mark, with a suffix no mark key carries.
func claimKey(req streamstore.ProduceRequest) string {
	if req.DedupBitmap {
		return req.DedupKey + ":claim:" + strconv.Itoa(int(req.DedupBit))
	}
	return req.DedupKey + ":claim"
}

// queueProduce queues req's transaction on pipe: MULTI, its XADDs, its
// mark, its PUBLISH and the removal of claim (unless ""), EXEC. The EXEC
// command's reply holds their replies in that order.
func queueProduce(ctx context.Context, pipe goredis.Pipeliner, req streamstore.ProduceRequest, claim string) *goredis.Cmd {
	pipe.Do(ctx, "multi")
	for _, values := range req.Entries {
		args := make([]any, 0, 3+2*len(values))
		args = append(args, "xadd", req.Stream, "*")
		for k, v := range values {
			args = append(args, k, v)
		}
		pipe.Do(ctx, args...)
	}
	ttl := produceTTL(req)
	switch markKind(req) {
	case "key":
		pipe.Do(ctx, "set", req.DedupKey, "1", "px", ttl)
	case "bit":
		pipe.Do(ctx, "setbit", req.DedupKey, req.DedupBit, 1)
		pipe.Do(ctx, "pexpire", req.DedupKey, ttl)
	}
	if req.Channel != "" {
		pipe.Do(ctx, "publish", req.Channel, req.Payload)
	}
	if claim != "" {
		pipe.Do(ctx, "del", claim)
	}
	return pipe.Do(ctx, "exec")
}

// produceResult reads the EXEC reply of req's transaction. The commands of
// an executed transaction all run; should an XADD have failed while the
// mark was written, the mark is taken back, so that a redelivery of the
// message is appended rather than taken for a repeat.
func (s *Store) produceResult(ctx context.Context, req streamstore.ProduceRequest, exec *goredis.Cmd) (streamstore.ProduceResult, error) {
	replies, err := exec.Slice()
	if err == nil && replies == nil {
		err = errors.New("transaction discarded")
	}
	if err != nil {
		return streamstore.ProduceResult{}, s.wrap(ctx, "produce", req.Stream, err)
	}
	if len(replies) < len(req.Entries) {
		return streamstore.ProduceResult{}, fmt.Errorf("produce %s: BUG: %d replies for %d entries", req.Stream, len(replies), len(req.Entries))
	}
	ids := make([]string, len(req.Entries))
	var failed error
	for k := range req.Entries {
		switch v := replies[k].(type) {
		case string:
			ids[k] = v
		case error:
			failed = cmp.Or(failed, v)
		default:
			failed = cmp.Or(failed, fmt.Errorf("unexpected XADD reply %T", v))
		}
	}
	if failed != nil {
		if req.DedupKey != "" {
			if req.DedupBitmap {
				s.client.SetBit(context.WithoutCancel(ctx), req.DedupKey, int64(req.DedupBit), 0)
			} else {
				s.client.Del(context.WithoutCancel(ctx), req.DedupKey)
			}
		}
		return streamstore.ProduceResult{}, s.wrap(ctx, "produce", req.Stream, failed)
	}
	// The entries are in, so the message is delivered whatever the mark's
	// and the publish's replies say: failing it now would have it spooled
	// and appended again. (Neither can fail once the transaction runs:
	// Redis refuses a transaction for memory before it starts.)
	return streamstore.ProduceResult{IDs: ids}, nil
}

// checkProduce refuses a request before any I/O, with an error that says
// what is wrong: an entry without fields makes a malformed XADD, which
// Redis would refuse as a syntax error (and, in a transaction, discard the
// whole transaction for).
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
