package codec

// Default limits. They are sized for the agent's batches: a batch of a few
// thousand readings is well under 1 MiB of JSON, so 4 MiB leaves headroom while
// keeping the worst case one payload can cost the cloud small.
const (
	DefaultMaxInputSize    = 4 << 20
	DefaultMaxDecodedSize  = 4 << 20
	DefaultMaxDepth        = 64
	DefaultMaxContainerLen = 1 << 18
	DefaultMaxValues       = 1 << 20

	// maxDepthCeiling caps MaxDepth whatever the caller asks for: the decoders
	// recurse once per level, and a goroutine stack overflow cannot be
	// recovered. encoding/json uses the same figure.
	maxDepthCeiling = 10000
)

// Limits bounds the work and memory one payload may cost. A zero or negative
// field means its default, so the zero Limits is the default Limits.
type Limits struct {
	// MaxInputSize caps the bytes as received, before any decoding.
	MaxInputSize int
	// MaxDecodedSize caps the serialized payload after inflation (and the
	// payload itself when it is not compressed). Inflation stops one byte past
	// it, so a deflate bomb costs at most this much memory.
	MaxDecodedSize int
	// MaxDepth caps the nesting of arrays and objects; the top-level container
	// is depth 1. Values above 10000 are treated as 10000.
	MaxDepth int
	// MaxContainerLen caps the elements of one array or the entries of one
	// object. MessagePack headers announce lengths up to 2^32-1; the default
	// keeps a pre-allocation from a claimed length at about the size of
	// MaxDecodedSize (2^18 slots of 16 bytes = 4 MiB).
	MaxContainerLen int
	// MaxValues caps the decoded values in total (every scalar, array and
	// object counts one). It bounds the amplification from input bytes to heap:
	// a 1-byte MessagePack nil becomes a 16-byte interface, a 3-byte map a few
	// hundred bytes of Go map.
	MaxValues int
}

// DefaultLimits returns the limits Decode applies when given the zero Limits.
func DefaultLimits() Limits {
	return Limits{
		MaxInputSize:    DefaultMaxInputSize,
		MaxDecodedSize:  DefaultMaxDecodedSize,
		MaxDepth:        DefaultMaxDepth,
		MaxContainerLen: DefaultMaxContainerLen,
		MaxValues:       DefaultMaxValues,
	}
}

func (l Limits) normalized() Limits {
	if l.MaxInputSize <= 0 {
		l.MaxInputSize = DefaultMaxInputSize
	}
	if l.MaxDecodedSize <= 0 {
		l.MaxDecodedSize = DefaultMaxDecodedSize
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxDepth > maxDepthCeiling {
		l.MaxDepth = maxDepthCeiling
	}
	if l.MaxContainerLen <= 0 {
		l.MaxContainerLen = DefaultMaxContainerLen
	}
	if l.MaxValues <= 0 {
		l.MaxValues = DefaultMaxValues
	}
	return l
}
