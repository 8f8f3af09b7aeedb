package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
)

// DefaultSequenceBlock is how many sequence numbers one reservation covers:
// one database write per thousand messages, and at most a thousand numbers
// skipped by a crash.
const DefaultSequenceBlock = 1000

// maxSequenceBlock bounds a reservation so that a mistaken block size does
// not burn through the number space.
const maxSequenceBlock = 1 << 20

// ErrSequenceCorrupt is returned when the stored high-water mark of a
// sequence is not a number; the sequence refuses to guess rather than
// restart at 1 and repeat message ids the cloud has already seen.
var ErrSequenceCorrupt = errors.New("sequence high-water mark is not a number")

// Sequence hands out the numbers of a persisted, strictly increasing counter
// (the {sequence} of msgId v2_{kid}_{sequence}, docs/agent.md). Numbers
// are reserved in blocks: the block's last number is written to agent_meta
// before the first of them is handed out, so a process killed at any point
// restarts above every number it ever returned. The price is a gap of at
// most one block per restart, which the cloud does not mind: it only
// de-duplicates on the id.
//
// Its methods are safe for concurrent use. Two Sequences on the same key
// (in one process or two) draw disjoint blocks, since each reservation is
// one atomic increment in the database, but their numbers interleave.
type Sequence struct {
	s     *Store
	key   string
	block uint64

	mu    sync.Mutex
	next  uint64 // the number Next returns when next <= limit
	limit uint64 // the last number of the reserved block; 0: none yet
}

// NewSequence returns the sequence stored under key in agent_meta, reserving
// block numbers at a time (DefaultSequenceBlock when block <= 0). It reads
// the stored mark once to refuse a corrupt one; nothing is reserved until
// the first Next, so opening a sequence that is never used skips nothing.
func (s *Store) NewSequence(ctx context.Context, key string, block int) (*Sequence, error) {
	if key == "" {
		return nil, errors.New("new sequence: empty key")
	}
	if block <= 0 {
		block = DefaultSequenceBlock
	}
	if block > maxSequenceBlock {
		return nil, fmt.Errorf("new sequence %s: block %d above %d", key, block, maxSequenceBlock)
	}
	v, err := s.Meta(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("new sequence: %w", err)
	default:
		if _, err := parseMark(v); err != nil {
			return nil, fmt.Errorf("new sequence %s: %w", key, err)
		}
	}
	return &Sequence{s: s, key: key, block: uint64(block)}, nil
}

// Next returns the next number, reserving a new block first when the
// current one is used up. Numbers start at 1.
func (q *Sequence) Next(ctx context.Context) (_ uint64, err error) {
	defer q.s.cond.observe(&err)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.limit == 0 || q.next > q.limit {
		if err := q.reserve(ctx); err != nil {
			return 0, err
		}
	}
	n := q.next
	q.next++
	return n, nil
}

// reserve moves the stored mark up by one block and takes the numbers
// above the old mark; mu is held. The increment and the read of its result
// are one statement, so concurrent reservers (another Sequence on the same
// key, another process) never get overlapping blocks. The WHERE clause
// leaves a mark that is not all digits alone (CAST would read it as 0 and
// restart the sequence); no row is then returned.
func (q *Sequence) reserve(ctx context.Context) error {
	var v string
	err := q.s.db.SQL().QueryRowContext(ctx,
		`INSERT INTO agent_meta (key, value) VALUES ($1, CAST($2 AS TEXT))
		 ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(agent_meta.value AS INTEGER) + $2 AS TEXT)
		 WHERE agent_meta.value <> '' AND agent_meta.value NOT GLOB '*[^0-9]*'
		   AND length(agent_meta.value) <= 18
		 RETURNING value`,
		q.key, int64(q.block)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reserve sequence %s: %w", q.key, ErrSequenceCorrupt)
	}
	if err != nil {
		return fmt.Errorf("reserve sequence %s: %w", q.key, err)
	}
	limit, err := parseMark(v)
	if err != nil {
		return fmt.Errorf("reserve sequence %s: %w", q.key, err)
	}
	if limit < q.block || limit <= q.limit {
		// Only a mark moved backwards by hand could do this; handing out
		// numbers from it could repeat ids.
		return fmt.Errorf("reserve sequence %s: mark %d below the block of %d: %w", q.key, limit, q.block, ErrSequenceCorrupt)
	}
	q.next, q.limit = limit-q.block+1, limit
	return nil
}

// parseMark reads a stored high-water mark. Its 18-digit bound keeps the
// database's int64 arithmetic far from overflow.
func parseMark(v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || len(v) > 18 || n > math.MaxInt64/2 {
		return 0, fmt.Errorf("%w: %q", ErrSequenceCorrupt, v)
	}
	return n, nil
}
