// Package payload builds what the agent publishes for a batch of readings,
// in the four payload formats (custom, tags, ecp, ml) and the heartbeat
// message, and encodes it with a subscription's compression through
// core/codec (see Compressor). Documents hold only the value types
// codec.Decode produces, so a payload decodes back to the same document in
// every wire format. See docs/agent-payloads.md.
package payload

import (
	"fmt"
	"strings"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Format is a subscription's payload_format.
type Format string

// Payload formats (docs/agent-payloads.md). Custom is the default.
const (
	Custom Format = "custom"
	Tags   Format = "tags"
	ECP    Format = "ecp"
	ML     Format = "ml"
)

// Formats lists every payload format.
func Formats() []Format { return []Format{Custom, Tags, ECP, ML} }

// ParseFormat validates a subscription's payload_format; "" is the default,
// Custom. The error is an *adapters.FieldError naming payload_format, as the
// agent's API reports validation failures.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return Custom, nil
	}
	for _, f := range Formats() {
		if s == string(f) {
			return f, nil
		}
	}
	names := make([]string, 0, 4)
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return "", &adapters.FieldError{Field: "payload_format",
		Msg: fmt.Sprintf("unknown format %q (valid: %s)", s, strings.Join(names, ", "))}
}

// ParseCompression validates a subscription's compression; "" is the
// default, json. The names are codec's wire formats. The error is an
// *adapters.FieldError naming compression.
func ParseCompression(s string) (codec.Format, error) {
	if s == "" {
		return codec.FormatJSON, nil
	}
	f, err := codec.ParseFormat(s)
	if err != nil {
		names := make([]string, 0, 4)
		for _, f := range codec.Formats() {
			names = append(names, string(f))
		}
		return "", &adapters.FieldError{Field: "compression",
			Msg: fmt.Sprintf("unknown compression %q (valid: %s)", s, strings.Join(names, ", "))}
	}
	return f, nil
}
