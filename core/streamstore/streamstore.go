// Package streamstore is the contract between the Cloud API, which appends
// telemetry batches, and the ingestion workers, which consume them through
// consumer groups; it also carries real-time pub/sub and the msgId
// de-duplication marks. Roles depend on Store only; streamstore/redis and
// streamstore/memory implement it and the streamstore/storetest suite holds
// both to the same semantics. Producers never trim (Add with a maxLen
// refuses with ErrStreamFull), and consumers trim only below SafeTrimID.
// See docs/stream-store.md.
package streamstore

import (
	"context"
	"errors"
	"time"
)

// Errors callers branch on. Implementations wrap them with the operation and
// the stream, so test them with errors.Is.
var (
	// ErrStreamFull is returned by Add and AddBatch when the stream holds
	// maxLen entries already. The caller backs off or spools; the store never
	// trims on the producer's behalf.
	ErrStreamFull = errors.New("stream is full")
	// ErrNoGroup is returned when the stream or its consumer group does not
	// exist (Redis: NOGROUP).
	ErrNoGroup = errors.New("no such stream or consumer group")
	// ErrOutOfMemory is returned by writes refused because the store is at
	// its memory cap (Redis: OOM under maxmemory with a noeviction policy).
	// Reads, acknowledgements and trims still work, so consumers can drain.
	ErrOutOfMemory = errors.New("stream store is out of memory")
	// ErrCopyInFlight is returned by Produce for a message another producer
	// is appending at that moment (a copy of it, under the same mark). The
	// message is neither appended nor a known repeat yet: retry it later,
	// when it will be one (or, should the other producer have died, be
	// appended). It says nothing about the store's health.
	ErrCopyInFlight = errors.New("another copy of this message is being appended")
	// ErrClosed is returned by every call on a closed store.
	ErrClosed = errors.New("stream store is closed")
)

// DefaultCount is used by ReadGroup, AutoClaim, PendingEntries and Range
// when their count is zero or negative: every read is bounded.
const DefaultCount = 100

// Entry is one stream entry.
type Entry struct {
	ID     string
	Values map[string]string
}

// PendingEntry is one entry of a consumer group's pending entries list: it
// was delivered to Consumer and not acknowledged yet.
type PendingEntry struct {
	ID       string
	Consumer string
	// Idle is the time since the entry was last delivered or claimed.
	Idle time.Duration
	// Deliveries counts deliveries: 1 after ReadGroup, +1 per AutoClaim.
	Deliveries int64
}

// GroupInfo describes a consumer group.
type GroupInfo struct {
	Name string
	// LastDeliveredID is the id of the newest entry the group has delivered
	// ("0-0" when none); entries after it are still to be delivered.
	LastDeliveredID string
	// Pending counts entries delivered and not acknowledged.
	Pending int64
	// Lag counts entries added after LastDeliveredID, or -1 when the
	// backend cannot tell (Redis reports no lag for some groups). Redis
	// derives it from counters, so it still counts undelivered entries that
	// were trimmed away, which SafeTrimID never allows.
	Lag int64
}

// Message is one pub/sub message.
type Message struct {
	Channel string
	Payload []byte
}

// Subscription receives the messages published to its channels. Delivery
// is at most once: each subscription has a bounded buffer and a message
// that finds it full is dropped and counted, so a slow dashboard can never
// stall publishers or grow memory (Redis, for its part, disconnects a
// subscriber past client-output-buffer-limit pubsub; go-redis then
// resubscribes and the messages in between are lost).
type Subscription interface {
	// C delivers messages in publication order per channel. It is closed
	// after Close, or when the store is closed.
	C() <-chan Message
	// Dropped counts messages dropped because the buffer was full.
	Dropped() uint64
	// Close unsubscribes; it is safe to call more than once.
	Close() error
}

// DedupBitmapBits is the size of a de-duplication bitmap: DedupBit ranges
// over it, so one bitmap key holds at most 8 KiB whatever the caller sends.
const DedupBitmapBits = 1 << 16

// ProduceRequest is what the Cloud API writes for one MQTT message.
//
// De-duplication has two forms, and the zero value of the fields below
// means the first, so a request built without them keeps today's meaning:
//
//   - whole key (DedupBitmap false): the message is a repeat when DedupKey
//     exists; after the append DedupKey is set with a TTL of DedupTTL. One
//     key per message.
//   - bit (DedupBitmap true): DedupKey names a bitmap and the message is
//     its bit DedupBit; the message is a repeat when that bit is set; after
//     the append the bit is set and the bitmap's TTL is reset to DedupTTL,
//     so a bitmap lives DedupTTL past the last message appended into it.
//     Many messages share one key, about one bit each.
//
// Either way the mark is written only after the append succeeded, and a
// repeat writes nothing, not even a TTL refresh.
type ProduceRequest struct {
	// DedupKey, when set, makes the request de-duplicate; "" turns
	// de-duplication off and the fields below are ignored.
	DedupKey string
	DedupTTL time.Duration
	// DedupBitmap selects the bit form, with DedupBit the message's bit.
	DedupBitmap bool
	DedupBit    uint16
	Stream      string
	// Entries are appended in order, all or nothing; with MaxLen > 0 the
	// request fails with ErrStreamFull when they would take the stream past
	// MaxLen. The stream's length is read before the append, so producers
	// appending to one stream at the same time may overshoot MaxLen by what
	// they have in flight; nothing is ever trimmed to make room.
	Entries []map[string]string
	MaxLen  int64
	// Channel, when set, receives Payload after the append.
	Channel string
	Payload []byte
}

// ProduceResult reports what Produce did.
type ProduceResult struct {
	// Duplicate is true when the message's mark (DedupKey, or its bit)
	// existed: nothing was written.
	Duplicate bool
	IDs       []string
}

// Store is a stream store. Implementations are safe for concurrent use.
//
// Ids are Redis stream ids, "ms-seq" (see ParseID). A count of zero or less
// means DefaultCount. Every call honours ctx: a cancelled context makes the
// call return ctx's error (wrapped).
type Store interface {
	// Add appends values (at least one field) to stream, creating it when
	// absent, and returns the new entry's id. With maxLen > 0 it refuses
	// with ErrStreamFull when the stream already has maxLen entries; the
	// check and the append are atomic, so concurrent producers cannot
	// overshoot maxLen.
	Add(ctx context.Context, stream string, values map[string]string, maxLen int64) (id string, err error)
	// AddBatch appends every entry of batch in order in one round trip and
	// returns their ids. With maxLen > 0 the whole batch is refused with
	// ErrStreamFull when it would take the stream past maxLen: all or
	// nothing.
	AddBatch(ctx context.Context, stream string, batch []map[string]string, maxLen int64) (ids []string, err error)
	// Produce performs the Cloud API's writes for one MQTT message: unless
	// its mark exists (DedupKey, or DedupBit of it; see ProduceRequest),
	// append Entries, then set the mark and publish Payload. The mark is set
	// only with the append, so a message whose append failed is not taken
	// for a duplicate when the broker redelivers it. Copies of one message
	// produced at the same instant append once: a copy produced while
	// another is being appended either sees it appended (a duplicate) or is
	// refused with ErrCopyInFlight, to be retried. On a Redis Cluster that
	// holds only when the mark and the stream share a hash tag, as a
	// tenant's keys do (docs/stream-store.md); otherwise the steps run in
	// order, and two such copies may both be appended, which ingestion
	// absorbs because rows are keyed.
	Produce(ctx context.Context, req ProduceRequest) (ProduceResult, error)
	// ProduceBatch performs Produce for each of reqs, in order, in as few
	// round trips as the backend allows (two pipelines on one Redis server,
	// Sentinel, or each master of a Cluster). results[i] and errs[i] belong to reqs[i]; both slices
	// have len(reqs). A request sees the marks and appends of the requests
	// before it, so two copies of one message in one batch append once,
	// and MaxLen counts the entries appended before it. A failed request
	// does not stop the ones after it.
	ProduceBatch(ctx context.Context, reqs []ProduceRequest) (results []ProduceResult, errs []error)
	// EnsureGroup creates consumer group on stream (and the stream, when
	// absent), delivering entries after startID: "0" for every entry, "$"
	// for only entries added from now on; "" means "0", so entries appended
	// before the first worker started are not skipped. An existing group is
	// left as it is.
	EnsureGroup(ctx context.Context, stream, group, startID string) error
	// ReadGroup delivers up to count entries the group has not delivered to
	// any consumer yet (XREADGROUP ">"), recording them as pending for
	// consumer. With block > 0 and nothing to deliver it waits up to block
	// for an Add; block <= 0 does not wait. No entries within block is not
	// an error: it returns no entries (a nil slice) and a nil error.
	// ErrNoGroup when the group does not exist.
	ReadGroup(ctx context.Context, stream, group, consumer string, count int, block time.Duration) ([]Entry, error)
	// Ack acknowledges ids, removing them from the group's pending list, and
	// returns how many were pending. Unknown ids, groups and streams count
	// zero.
	Ack(ctx context.Context, stream, group string, ids ...string) (int64, error)
	// AutoClaim transfers to consumer up to count pending entries idle for
	// at least minIdle, scanning the pending list from start ("0-0" to begin;
	// "(id" excludes id), and returns them with the cursor to pass as start
	// next time ("0-0" once the scan wrapped). Each claim resets the entry's
	// idle time and adds one delivery. Pending entries that were trimmed away
	// are dropped from the pending list and not returned; they count
	// towards count, as in Redis 7.
	AutoClaim(ctx context.Context, stream, group, consumer string, minIdle time.Duration, start string, count int) (claimed []Entry, next string, err error)
	// PendingEntries lists up to count pending entries, oldest first.
	PendingEntries(ctx context.Context, stream, group string, count int) ([]PendingEntry, error)
	// Group describes group; ErrNoGroup when it or the stream is absent.
	Group(ctx context.Context, stream, group string) (GroupInfo, error)
	// TrimMinID removes the entries with ids below minID, exactly, and
	// returns how many went. Use SafeTrimID to choose minID.
	TrimMinID(ctx context.Context, stream, minID string) (int64, error)
	// SafeTrimID returns the highest id that TrimMinID may be given without
	// removing an entry group still needs: the smaller of the oldest pending
	// id and the id just after the last delivered one. Everything below it
	// was delivered and acknowledged. With several groups on one stream,
	// trim to the smallest of their SafeTrimIDs.
	SafeTrimID(ctx context.Context, stream, group string) (string, error)
	// Len returns the number of entries in stream; 0 when absent.
	Len(ctx context.Context, stream string) (int64, error)
	// Range returns up to count entries with start <= id <= end in order.
	// start may be "-" and end "+"; "(id" makes a bound exclusive; an id
	// without "-seq" means its whole millisecond.
	Range(ctx context.Context, stream, start, end string, count int) ([]Entry, error)
	// Streams returns the names of the streams matching the glob pattern
	// (Redis MATCH syntax: * ? [abc] [^a] [a-z] \x; "" matches all), sorted.
	// Empty streams are included. It sees the streams written through a
	// Store (Add, AddBatch, Produce, EnsureGroup), without scanning other
	// keys; the Redis store also finds, once, those that were there before.
	Streams(ctx context.Context, pattern string) ([]string, error)
	// Delete removes streams and keys and returns how many existed. Reads
	// blocked on a deleted stream return ErrNoGroup.
	Delete(ctx context.Context, keys ...string) (int64, error)
	// Publish sends payload to the current subscribers of channel.
	Publish(ctx context.Context, channel string, payload []byte) error
	// Subscribe subscribes to channels; once it returns, every later
	// Publish to them reaches the subscription (buffer permitting).
	Subscribe(ctx context.Context, channels ...string) (Subscription, error)
	// SetNX sets key to value unless it exists, reporting whether it did.
	// With ttl > 0 the key expires after ttl (millisecond precision).
	SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
	// Memory reports the bytes in use and the cap (0 = unlimited).
	Memory(ctx context.Context) (used, max int64, err error)
	// Ping checks the store answers.
	Ping(ctx context.Context) error
	// Close releases the store: blocked reads return ErrClosed and
	// subscriptions close. It is safe to call more than once.
	Close() error
}
