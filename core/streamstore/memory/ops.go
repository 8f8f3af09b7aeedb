package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

var errWrongType = errors.New("WRONGTYPE key holds a value of another kind")

// Add appends one entry; see streamstore.Store.
func (s *Store) Add(ctx context.Context, name string, values map[string]string, maxLen int64) (string, error) {
	ids, err := s.add(ctx, name, []map[string]string{values}, maxLen)
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// AddBatch appends entries all or nothing; see streamstore.Store.
func (s *Store) AddBatch(ctx context.Context, name string, batch []map[string]string, maxLen int64) ([]string, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	return s.add(ctx, name, batch, maxLen)
}

func (s *Store) add(ctx context.Context, name string, batch []map[string]string, maxLen int64) ([]string, error) {
	for _, values := range batch {
		if len(values) == 0 {
			return nil, fmt.Errorf("xadd %s: an entry needs at least one field", name)
		}
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("xadd %s: %w", name, err)
	}
	defer s.mu.Unlock()
	return s.addLocked(name, batch, maxLen)
}

// addLocked appends a validated batch; the caller holds s.mu.
func (s *Store) addLocked(name string, batch []map[string]string, maxLen int64) ([]string, error) {
	now := s.opts.Now()
	st := s.streams[name]
	if st == nil && s.liveKey(name, now) != nil {
		return nil, fmt.Errorf("xadd %s: %w", name, errWrongType)
	}
	var have int64
	if st != nil {
		have = int64(len(st.entries))
	}
	if maxLen > 0 && have+int64(len(batch)) > maxLen {
		return nil, fmt.Errorf("xadd %s: %w (%d entries, max %d)", name, streamstore.ErrStreamFull, have, maxLen)
	}
	fresh := st == nil
	if fresh {
		st = newStream()
	}
	// Generate the ids on a copy of the last id, so a refusal below leaves
	// the stream untouched.
	last := st.lastID
	added := make([]entry, len(batch))
	var bytes int64
	for i, values := range batch {
		id, err := nextID(last, now)
		if err != nil {
			return nil, fmt.Errorf("xadd %s: %w", name, err)
		}
		last = id
		idStr := id.String()
		added[i] = entry{id: id, idStr: idStr, values: maps.Clone(values), size: entrySize(idStr, values)}
		bytes += added[i].size
	}
	if fresh {
		bytes += streamOverhead + int64(len(name))
	}
	if err := s.reserve(bytes); err != nil {
		return nil, fmt.Errorf("xadd %s: %w", name, err)
	}
	if fresh {
		s.streams[name] = st
	}
	st.bytes += bytes
	st.lastID = last
	st.entries = append(st.entries, added...)
	st.wakeReaders()
	ids := make([]string, len(added))
	for i := range added {
		ids[i] = added[i].idStr
	}
	return ids, nil
}

// Produce runs the Cloud API's per-message writes atomically under the
// store's lock; see streamstore.Store.
func (s *Store) Produce(ctx context.Context, req streamstore.ProduceRequest) (streamstore.ProduceResult, error) {
	for _, values := range req.Entries {
		if len(values) == 0 {
			return streamstore.ProduceResult{}, fmt.Errorf("produce %s: an entry needs at least one field", req.Stream)
		}
	}
	if err := s.lock(ctx); err != nil {
		return streamstore.ProduceResult{}, fmt.Errorf("produce %s: %w", req.Stream, err)
	}
	if req.DedupKey != "" {
		dup, err := s.markedLocked(req)
		if err != nil {
			s.mu.Unlock()
			return streamstore.ProduceResult{}, fmt.Errorf("produce %s: %w", req.Stream, err)
		}
		if dup {
			s.mu.Unlock()
			return streamstore.ProduceResult{Duplicate: true}, nil
		}
	}
	var ids []string
	if len(req.Entries) > 0 {
		var err error
		if ids, err = s.addLocked(req.Stream, req.Entries, req.MaxLen); err != nil {
			s.mu.Unlock()
			return streamstore.ProduceResult{}, fmt.Errorf("produce: %w", err)
		}
	}
	if req.DedupKey != "" {
		// Past the memory cap the mark is not kept: a redelivery is then
		// appended again, which ingestion absorbs; refusing here would lose
		// nothing either, but the entries are already in. The TTL is at
		// least 1 ms, as the Redis store sends it.
		ttl := max(req.DedupTTL, time.Millisecond)
		if req.DedupBitmap {
			_ = s.setBitLocked(req.DedupKey, req.DedupBit, ttl)
		} else {
			_, _ = s.setNXLocked(req.DedupKey, "1", ttl)
		}
	}
	s.mu.Unlock()
	if req.Channel != "" {
		if err := s.Publish(ctx, req.Channel, req.Payload); err != nil {
			return streamstore.ProduceResult{IDs: ids}, fmt.Errorf("produce: %w", err)
		}
	}
	return streamstore.ProduceResult{IDs: ids}, nil
}

// ProduceBatch runs Produce for each request in order; see
// streamstore.Store. There is no round trip to save in process, and taking
// the lock per request keeps a long batch from holding off readers, and
// publishing outside it as Produce does. A cancelled ctx fails each
// request on its own, so every one reports the error.
func (s *Store) ProduceBatch(ctx context.Context, reqs []streamstore.ProduceRequest) ([]streamstore.ProduceResult, []error) {
	results, errs := make([]streamstore.ProduceResult, len(reqs)), make([]error, len(reqs))
	for i, req := range reqs {
		results[i], errs[i] = s.Produce(ctx, req)
	}
	return results, errs
}

// markedLocked reports whether req's de-duplication mark exists: the key,
// which a stream of that name also is (Redis's EXISTS), or the bit, which a
// stream cannot hold (Redis's GETBIT answers WRONGTYPE). Called with s.mu
// held.
func (s *Store) markedLocked(req streamstore.ProduceRequest) (bool, error) {
	now := s.opts.Now()
	if !req.DedupBitmap {
		return s.streams[req.DedupKey] != nil || s.liveKey(req.DedupKey, now) != nil, nil
	}
	if s.streams[req.DedupKey] != nil {
		return false, fmt.Errorf("getbit %s: %w", req.DedupKey, errWrongType)
	}
	k := s.liveKey(req.DedupKey, now)
	return k != nil && k.bit(req.DedupBit), nil
}

// EnsureGroup creates group unless it exists; see streamstore.Store.
func (s *Store) EnsureGroup(ctx context.Context, name, groupName, startID string) error {
	if err := s.lock(ctx); err != nil {
		return fmt.Errorf("xgroup create %s %s: %w", name, groupName, err)
	}
	defer s.mu.Unlock()
	st := s.streams[name]
	if st == nil && s.liveKey(name, s.opts.Now()) != nil {
		return fmt.Errorf("xgroup create %s %s: %w", name, groupName, errWrongType)
	}
	var start streamstore.ID
	switch startID {
	case "", "0":
	case "$":
		if st != nil {
			start = st.lastID
		}
	default:
		id, err := streamstore.ParseID(startID)
		if err != nil {
			return fmt.Errorf("xgroup create %s %s: %w", name, groupName, err)
		}
		start = id
	}
	if st != nil && st.groups[groupName] != nil {
		return nil
	}
	bytes := int64(groupOverhead + len(groupName))
	if st == nil {
		bytes += streamOverhead + int64(len(name))
	}
	if err := s.reserve(bytes); err != nil {
		return fmt.Errorf("xgroup create %s %s: %w", name, groupName, err)
	}
	if st == nil {
		st = newStream()
		s.streams[name] = st
	}
	st.bytes += bytes
	st.groups[groupName] = &group{lastDelivered: start, pel: make(map[streamstore.ID]*nack)}
	return nil
}

// lookupGroup returns the stream and group, or ErrNoGroup.
func (s *Store) lookupGroup(name, groupName string) (*stream, *group, error) {
	st := s.streams[name]
	if st == nil {
		return nil, nil, streamstore.ErrNoGroup
	}
	g := st.groups[groupName]
	if g == nil {
		return nil, nil, streamstore.ErrNoGroup
	}
	return st, g, nil
}

// ReadGroup delivers new entries, waiting up to block; see
// streamstore.Store.
func (s *Store) ReadGroup(ctx context.Context, name, groupName, consumer string, count int, block time.Duration) ([]streamstore.Entry, error) {
	if count <= 0 {
		count = streamstore.DefaultCount
	}
	var deadline time.Time
	if block > 0 {
		deadline = time.Now().Add(block)
	}
	var timer *time.Timer
	for {
		if err := s.lock(ctx); err != nil {
			return nil, fmt.Errorf("xreadgroup %s: %w", name, err)
		}
		st, g, err := s.lookupGroup(name, groupName)
		if err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("xreadgroup %s group %s: %w", name, groupName, err)
		}
		if out := g.readNew(st, consumer, count, s.opts.Now()); len(out) > 0 {
			s.charge(st, int64(len(out))*nackOverhead)
			s.mu.Unlock()
			return out, nil
		}
		wait := time.Until(deadline)
		if block <= 0 || wait <= 0 {
			s.mu.Unlock()
			return nil, nil
		}
		wake := st.waitChan()
		s.mu.Unlock()

		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-wake:
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("xreadgroup %s: %w", name, ctx.Err())
		case <-s.done:
			return nil, fmt.Errorf("xreadgroup %s: %w", name, streamstore.ErrClosed)
		}
	}
}

// charge accounts bytes to st without refusing: reads and claims must work
// on a full store so consumers can drain it.
func (s *Store) charge(st *stream, bytes int64) {
	st.bytes += bytes
	s.used += bytes
}

// Ack acknowledges ids; see streamstore.Store.
func (s *Store) Ack(ctx context.Context, name, groupName string, ids ...string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	parsed := make([]streamstore.ID, len(ids))
	for i, id := range ids {
		p, err := streamstore.ParseID(id)
		if err != nil {
			return 0, fmt.Errorf("xack %s: %w", name, err)
		}
		parsed[i] = p
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("xack %s: %w", name, err)
	}
	defer s.mu.Unlock()
	st, g, err := s.lookupGroup(name, groupName)
	if err != nil {
		return 0, nil // like XACK: nothing was pending there
	}
	var n int64
	for _, id := range parsed {
		if g.ack(id) {
			n++
		}
	}
	s.charge(st, -n*nackOverhead)
	return n, nil
}

// AutoClaim transfers idle pending entries; see streamstore.Store. The loop
// follows Redis 7's xautoclaimCommand: at most count*10 pending entries are
// examined, entries trimmed from the stream are dropped from the PEL and
// count towards count, and the cursor is the next pending id or "0-0".
func (s *Store) AutoClaim(ctx context.Context, name, groupName, consumer string, minIdle time.Duration, start string, count int) ([]streamstore.Entry, string, error) {
	if count <= 0 {
		count = streamstore.DefaultCount
	}
	from, ok, err := parseBound(start, false)
	if err != nil {
		return nil, "", fmt.Errorf("xautoclaim %s: %w", name, err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, "", fmt.Errorf("xautoclaim %s: %w", name, err)
	}
	defer s.mu.Unlock()
	st, g, err := s.lookupGroup(name, groupName)
	if err != nil {
		return nil, "", fmt.Errorf("xautoclaim %s group %s: %w", name, groupName, err)
	}
	if !ok {
		return nil, streamstore.MinID.String(), nil
	}
	now := s.opts.Now()
	attempts := count * 10
	var out []streamstore.Entry
	var dropped int64
	i := g.searchPEL(from)
	for ; attempts > 0 && count > 0 && i < len(g.order); i++ {
		id := g.order[i]
		n := g.pel[id]
		if n == nil {
			continue // tombstone of an acknowledged entry
		}
		attempts--
		e, exists := st.find(id)
		if !exists {
			delete(g.pel, id)
			dropped++
			count--
			continue
		}
		if now.Sub(n.delivered) < minIdle {
			continue
		}
		n.consumer, n.delivered = consumer, now
		n.count++
		out = append(out, streamstore.Entry{ID: e.idStr, Values: maps.Clone(e.values)})
		count--
	}
	next := streamstore.MinID
	for ; i < len(g.order); i++ {
		if g.pel[g.order[i]] != nil {
			next = g.order[i]
			break
		}
	}
	if dropped > 0 {
		g.compact()
		s.charge(st, -dropped*nackOverhead)
	}
	return out, next.String(), nil
}

// PendingEntries lists pending entries oldest first; see streamstore.Store.
func (s *Store) PendingEntries(ctx context.Context, name, groupName string, count int) ([]streamstore.PendingEntry, error) {
	if count <= 0 {
		count = streamstore.DefaultCount
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("xpending %s: %w", name, err)
	}
	defer s.mu.Unlock()
	_, g, err := s.lookupGroup(name, groupName)
	if err != nil {
		return nil, fmt.Errorf("xpending %s group %s: %w", name, groupName, err)
	}
	now := s.opts.Now()
	var out []streamstore.PendingEntry
	for _, id := range g.order {
		if len(out) == count {
			break
		}
		n := g.pel[id]
		if n == nil {
			continue
		}
		out = append(out, streamstore.PendingEntry{
			ID: id.String(), Consumer: n.consumer, Idle: max(now.Sub(n.delivered), 0), Deliveries: n.count,
		})
	}
	return out, nil
}

// Group describes a consumer group; see streamstore.Store. Lag is always
// known here.
func (s *Store) Group(ctx context.Context, name, groupName string) (streamstore.GroupInfo, error) {
	if err := s.lock(ctx); err != nil {
		return streamstore.GroupInfo{}, fmt.Errorf("xinfo groups %s: %w", name, err)
	}
	defer s.mu.Unlock()
	st, g, err := s.lookupGroup(name, groupName)
	if err != nil {
		return streamstore.GroupInfo{}, fmt.Errorf("xinfo groups %s group %s: %w", name, groupName, err)
	}
	return streamstore.GroupInfo{
		Name:            groupName,
		LastDeliveredID: g.lastDelivered.String(),
		Pending:         int64(len(g.pel)),
		Lag:             g.lag(st),
	}, nil
}

// TrimMinID removes the entries below minID; see streamstore.Store. Like
// XTRIM it leaves the PEL alone: a trimmed pending entry stays pending until
// it is acknowledged or AutoClaim drops it.
func (s *Store) TrimMinID(ctx context.Context, name, minID string) (int64, error) {
	id, err := streamstore.ParseID(minID)
	if err != nil {
		return 0, fmt.Errorf("xtrim %s: %w", name, err)
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("xtrim %s: %w", name, err)
	}
	defer s.mu.Unlock()
	st := s.streams[name]
	if st == nil {
		return 0, nil
	}
	n, bytes := st.trimBefore(id)
	s.charge(st, -bytes)
	return int64(n), nil
}

// SafeTrimID returns the highest safe MINID for group; see
// streamstore.Store.
func (s *Store) SafeTrimID(ctx context.Context, name, groupName string) (string, error) {
	if err := s.lock(ctx); err != nil {
		return "", fmt.Errorf("safe trim id %s: %w", name, err)
	}
	defer s.mu.Unlock()
	_, g, err := s.lookupGroup(name, groupName)
	if err != nil {
		return "", fmt.Errorf("safe trim id %s group %s: %w", name, groupName, err)
	}
	safe := g.lastDelivered.Next()
	if oldest, ok := g.oldestPending(); ok && oldest.Compare(safe) < 0 {
		safe = oldest
	}
	return safe.String(), nil
}

// Len counts the entries of a stream; see streamstore.Store.
func (s *Store) Len(ctx context.Context, name string) (int64, error) {
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("xlen %s: %w", name, err)
	}
	defer s.mu.Unlock()
	if st := s.streams[name]; st != nil {
		return int64(len(st.entries)), nil
	}
	if s.liveKey(name, s.opts.Now()) != nil {
		return 0, fmt.Errorf("xlen %s: %w", name, errWrongType)
	}
	return 0, nil
}

// Range returns entries between two bounds; see streamstore.Store.
func (s *Store) Range(ctx context.Context, name, start, end string, count int) ([]streamstore.Entry, error) {
	if count <= 0 {
		count = streamstore.DefaultCount
	}
	from, okFrom, err := parseBound(start, false)
	if err != nil {
		return nil, fmt.Errorf("xrange %s: %w", name, err)
	}
	to, okTo, err := parseBound(end, true)
	if err != nil {
		return nil, fmt.Errorf("xrange %s: %w", name, err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("xrange %s: %w", name, err)
	}
	defer s.mu.Unlock()
	st := s.streams[name]
	if st == nil || !okFrom || !okTo {
		return nil, nil
	}
	var out []streamstore.Entry
	for i := st.search(from); i < len(st.entries) && len(out) < count; i++ {
		e := &st.entries[i]
		if e.id.Compare(to) > 0 {
			break
		}
		out = append(out, streamstore.Entry{ID: e.idStr, Values: maps.Clone(e.values)})
	}
	return out, nil
}

// Streams lists the streams matching a Redis glob; see streamstore.Store.
func (s *Store) Streams(ctx context.Context, pattern string) ([]string, error) {
	if pattern == "" {
		pattern = "*" // SCAN without MATCH
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("scan %s: %w", pattern, err)
	}
	defer s.mu.Unlock()
	var out []string
	for name := range s.streams {
		if matchGlob(pattern, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Delete removes streams and keys; see streamstore.Store. Readers blocked
// on a deleted stream wake and get ErrNoGroup.
func (s *Store) Delete(ctx context.Context, keys ...string) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("del: %w", err)
	}
	defer s.mu.Unlock()
	now := s.opts.Now()
	var n int64
	for _, key := range keys {
		if st := s.streams[key]; st != nil {
			delete(s.streams, key)
			s.used -= st.bytes
			st.wakeReaders()
			n++
		} else if k := s.liveKey(key, now); k != nil {
			s.removeKey(key, k)
			n++
		}
	}
	return n, nil
}
