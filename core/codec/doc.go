// Package codec turns telemetry payloads, as they travel over MQTT, into
// JSON-compatible Go values and back.
//
// Each agent subscription chooses whether to DEFLATE-compress, whether to use
// MessagePack instead of JSON, and whether to replace well-known field names
// with small integers (key compaction). MQTT carries no content type, so the
// cloud has to recognise every layer from the bytes alone: [Decode] does that,
// reports what it found in [Layers], and undoes each layer. [Encode] produces
// the same combinations for the agent, for tests and for the operator CLI.
//
// The bytes come from devices we do not control, over a broker that anyone
// holding a device key can publish to. So every size the bytes claim is checked
// against [Limits] before anything is allocated, inflation stops at a byte cap,
// nesting is bounded, and no input makes the package panic. That is why the
// package has its own small MessagePack and JSON value decoders rather than
// general-purpose ones: those recurse without a depth bound (a 4 MiB payload of
// 0x91 bytes is four million nested arrays and overflows the goroutine stack,
// which is fatal rather than a recoverable panic), pre-allocate from lengths
// the header declares, and silently keep the last of duplicate keys. Rejecting
// duplicates matters here: if two parsers disagree about which "msgId" a
// payload carries, de-duplication by msgId can be steered.
//
// Decoded values use only nil, bool, string, int64, uint64 (only above
// math.MaxInt64), float64, []byte (MessagePack bin), []any and map[string]any,
// so they can be handed to encoding/json or re-encoded by [Encode] unchanged.
//
// The package also owns the two identifier formats that appear on the wire:
// message ids (v2_{kid}_{sequence}, see [ParseMsgID]) and the 22-character
// URL-safe Base64 form of tenant and agent UUIDs used in MQTT topics (see
// [DecodeID]).
//
// The wire format, the compaction dictionary and the limits are documented for
// other implementations in docs/codec.md.
package codec
