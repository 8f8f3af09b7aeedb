package telemetry

import "github.com/edgeplat/edgeplat/core/codec"

// MaxPayloadBytes is the largest telemetry payload the Cloud API takes from
// an agent, after inflation: the codec's default decoded-size limit, which
// the API's pipeline applies.
const MaxPayloadBytes = codec.DefaultMaxDecodedSize

// MaxEntryExpansion bounds how much larger than its payload one stream
// entry's JSON can be. A payload maps to one entry per device; an entry
// repeats nothing per reading that the payload did not carry, so its size
// follows the payload's bytes: JSON spells each reading's field names out
// (about 3 times a compact MessagePack reading), a float64 takes up to 24
// characters against 9 bytes, and a string's worst character takes 6
// (`\u003c`) against 1. 16 leaves room above the worst of those.
const MaxEntryExpansion = 16

// MaxMessageBytes bounds one stream entry's JSON. It derives from the API's
// payload limit, so that ingest accepts every entry the API can produce: a
// lower bound of its own once dead-lettered valid 60,000-reading messages.
// The bound still keeps one entry's decoding memory finite.
const MaxMessageBytes = MaxEntryExpansion * MaxPayloadBytes

// MaxLogBatchBytes bounds one agent logs stream entry's JSON. Log uploads
// are cut into entries of at most half a megabyte, with one line never
// over half of this, so the telemetry bound, sized for the largest
// telemetry payload, would let one log line grow far past what a log
// line needs.
const MaxLogBatchBytes = 1 << 20
