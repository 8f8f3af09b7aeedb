package codec

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them, with
// context (which layer, which offset) added, so callers can pick a metric label
// or an HTTP status with errors.Is and still log something useful.
var (
	// ErrTooLarge reports that a payload, its inflated form, one container or
	// the number of decoded values exceeds its limit.
	ErrTooLarge = errors.New("codec: payload too large")
	// ErrTooDeep reports nesting deeper than the configured limit.
	ErrTooDeep = errors.New("codec: payload nested too deep")
	// ErrMalformed reports bytes that are not a valid payload: truncated,
	// corrupt, trailing garbage, duplicate keys, or of no recognisable format.
	ErrMalformed = errors.New("codec: malformed payload")
	// ErrUnsupported reports a valid encoding of something this codec does not
	// carry: an unknown dictionary version, a MessagePack extension other than
	// timestamp, a map key that is not a string or integer, an unknown format.
	ErrUnsupported = errors.New("codec: unsupported")
	// ErrUnknownIndex reports a compacted key whose index is not in the
	// dictionary version the payload names.
	ErrUnknownIndex = errors.New("codec: unknown key-compaction index")
	// ErrInvalidMsgID reports a string that is not a v2 message id.
	ErrInvalidMsgID = errors.New("codec: invalid msgId")
	// ErrInvalidID reports a string that is not a 22-character id or a
	// canonical UUID.
	ErrInvalidID = errors.New("codec: invalid id")
)
