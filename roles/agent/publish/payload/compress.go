package payload

import (
	"fmt"
	"sync/atomic"

	"github.com/edgeplat/edgeplat/core/codec"
)

// The compression rule (docs/agent-payloads.md, section Compression).
const (
	// DeflateMinBytes: a +deflate format compresses only an encoded
	// payload larger than this. Smaller ones gain little and cost CPU
	// the device may need for polling.
	DeflateMinBytes = 4096
	// DeflateMaxCPU: and only while CPU use is below this percentage, so
	// compression never competes with the agent's real work on a busy box.
	DeflateMaxCPU = 70.0
	// RawJSONEvery: every this-many-th publish of a Compressor is plain
	// JSON whatever the setting, so anything on the topic that reads only
	// JSON still sees the data regularly.
	RawJSONEvery = 1000
)

// Compressor encodes one subscription's payloads with its compression
// setting under that rule. It counts publishes for the every-1000th rule,
// so one Compressor belongs to one subscription. It is safe for concurrent
// use.
type Compressor struct {
	format codec.Format
	cpu    func() float64
	n      atomic.Uint64
}

// NewCompressor returns a Compressor for a compression setting (a codec
// wire format; "" is json). cpu reports the CPU use in percent (0 to 100);
// nil means unknown, and then only the size decides.
func NewCompressor(compression codec.Format, cpu func() float64) (*Compressor, error) {
	f, err := ParseCompression(string(compression))
	if err != nil {
		return nil, err
	}
	return &Compressor{format: f, cpu: cpu}, nil
}

// Format is the compression setting.
func (c *Compressor) Format() codec.Format { return c.format }

// Encode encodes doc and returns the bytes and the wire format actually
// used: the setting, or without deflate when the payload is at most
// DeflateMinBytes or CPU use is at DeflateMaxCPU or more, or json on every
// RawJSONEvery-th call. Every call counts, failed ones included, so the
// rhythm of raw publishes does not depend on errors.
func (c *Compressor) Encode(doc any) ([]byte, codec.Format, error) {
	n := c.n.Add(1)
	f := c.format
	if n%RawJSONEvery == 0 {
		f = codec.FormatJSON
	}
	base := codec.FormatJSON
	if f.Encoding() == codec.EncodingMsgpack {
		base = codec.FormatMsgpack
	}
	out, err := codec.Encode(doc, codec.EncodeOptions{Format: base})
	if err != nil {
		return nil, "", fmt.Errorf("payload: encode %s: %w", base, err)
	}
	if !f.Deflated() || len(out) <= DeflateMinBytes || !c.cpuAllows() {
		return out, base, nil
	}
	// Encoded a second time with deflate: core/codec offers no way to
	// compress bytes already serialized, and this happens only for
	// payloads over 4 KB.
	z, err := codec.Encode(doc, codec.EncodeOptions{Format: f})
	if err != nil {
		return nil, "", fmt.Errorf("payload: encode %s: %w", f, err)
	}
	return z, f, nil
}

// Publishes is how many payloads the Compressor has encoded.
func (c *Compressor) Publishes() uint64 { return c.n.Load() }

func (c *Compressor) cpuAllows() bool {
	if c.cpu == nil {
		return true
	}
	return c.cpu() < DeflateMaxCPU
}
