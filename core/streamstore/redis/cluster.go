package redis

import (
	"context"
	"errors"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// produceBatchCluster is ProduceBatch on Redis Cluster. A request whose
// keys (stream, mark and the mark's claim) share a hash tag, as a
// tenant's do (see keys.go), runs as on one server: with the other
// requests for the same master, in that master's two pipelines, its
// transaction on one slot. Masters run in parallel. A request whose keys
// hash to different slots cannot be one transaction: its steps run in
// order after the others (produceInSteps), and two copies of it produced
// at the same instant may both be appended.
//
// Copies of one message share their keys, and so their master and their
// pipeline, so the batch's order between them is kept; so is MaxLen's
// count between requests for one stream.
//
// When the slots moved (a resharding, a failover) a request may meet a
// MOVED reply, or a master gone: it fails with that error, having written
// nothing, the client reloads the slot map, and the caller retries it as
// any failed request.
func (s *Store) produceBatchCluster(ctx context.Context, cluster *goredis.ClusterClient, reqs []streamstore.ProduceRequest) ([]streamstore.ProduceResult, []error) {
	results, errs := make([]streamstore.ProduceResult, len(reqs)), make([]error, len(reqs))
	wire := make([]streamstore.ProduceRequest, len(reqs))
	byMaster := make(map[*goredis.Client][]int)
	var inSteps []int
	for i, req := range reqs {
		if errs[i] = checkProduce(req); errs[i] != nil {
			continue
		}
		req.Stream, req.DedupKey = s.wireKey(req.Stream), s.wireKey(req.DedupKey)
		wire[i] = req
		if req.DedupKey != "" && hashTag(req.DedupKey) != hashTag(req.Stream) {
			inSteps = append(inSteps, i)
			continue
		}
		master, err := cluster.MasterForKey(ctx, req.Stream)
		if err != nil {
			errs[i] = s.wrap(ctx, "produce", reqs[i].Stream, err)
			continue
		}
		byMaster[master] = append(byMaster[master], i)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	var appended []string
	for master, idx := range byMaster {
		wg.Go(func() {
			sub := make([]streamstore.ProduceRequest, len(idx))
			for k, i := range idx {
				sub[k] = wire[i]
			}
			res, es, app := s.produceOn(ctx, master, sub, false)
			for k, i := range idx {
				results[i], errs[i] = res[k], es[k]
			}
			mu.Lock()
			appended = append(appended, app...)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, i := range inSteps {
		results[i], errs[i] = s.produceInSteps(ctx, wire[i], produceTTL(wire[i]))
	}
	if slotsMayHaveMoved(errs) {
		cluster.ReloadState(ctx) // lazy: the next command refreshes the map
	}
	// After the appends, as on one server; the stream's next write repeats
	// a registration lost here.
	s.register(ctx, appended)
	return results, errs
}

// slotsMayHaveMoved reports an error other than the refusals a healthy
// cluster gives (a full stream, a copy in flight) and the caller's end.
func slotsMayHaveMoved(errs []error) bool {
	for _, err := range errs {
		if err != nil && !errors.Is(err, streamstore.ErrStreamFull) && !errors.Is(err, streamstore.ErrCopyInFlight) &&
			!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return true
		}
	}
	return false
}

// register adds streams (keys) to the registry, one SADD per registry set
// in one pipeline. Failure is ignored: see registryKey.
func (s *Store) register(ctx context.Context, keys []string) {
	if len(keys) == 0 {
		return
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = s.nameOf(k)
	}
	_, _ = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for set, members := range s.byRegistry(names) {
			p.SAdd(ctx, set, members...)
		}
		return nil
	})
}
