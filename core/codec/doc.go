// Package codec turns telemetry payloads, as they travel over MQTT, into
// JSON-compatible Go values and back. MQTT carries no content type, so
// [Decode] recognises every layer (DEFLATE, MessagePack or JSON, key
// compaction) from the bytes alone, reports it in [Layers] and undoes it;
// [Encode] produces the same combinations. Input is untrusted: every size
// is checked against [Limits] before anything is allocated, and no input
// makes the package panic. Decoded values use only nil, bool, string,
// int64, uint64 (only above math.MaxInt64), float64, []byte, []any and
// map[string]any. The package also owns the wire identifiers: message ids
// ([ParseMsgID]) and the 22-character form of UUIDs in topics ([DecodeID]).
// See docs/codec.md.
package codec
