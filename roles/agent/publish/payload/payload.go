// Package payload builds what the agent publishes for a batch of readings,
// in the four payload formats of edge-agent.md §2 (custom, tags, ecp, ml)
// and the heartbeat message, and encodes it with a subscription's
// compression through core/codec under the rule of §8 (see Compressor).
//
// Documents are built as map[string]any holding only the value types
// codec.Decode produces (nil, bool, string, int64, uint64, float64, []any,
// map[string]any), so an encoded payload decodes back to the same
// document in every wire format, and the cloud reads what the agent meant.
//
// The formats differ in what they keep (the property table of §2):
//
//	                 custom              tags          ecp           ml
//	protocol meta    yes                 no            no            no
//	timestamps       ISO 8601            Unix ms       Unix ms       Unix ms
//	BAD read         quality+qualityCode error field   tag omitted   dtype error + error
//	null values      kept                kept          dropped       kept (as error)
//	de-duplication   no                  no            latest wins   no
//
// Node, group and tag names of the snapshot formats (tags, ecp, ml):
//
//   - node is the device name the protocol reported when the readings that
//     name a device all name the same one, else the endpoint name;
//   - group is derived from the endpoint name by Group;
//   - a tag is named by its metric; when the batch holds readings of more
//     than one device the name is "<deviceName>.<metric>", the same naming
//     the cloud's readings API uses, so that two devices' metrics of the
//     same name stay apart under the one node;
//   - the payload timestamp is that of the newest reading: these formats
//     carry one time for all values, and the newest reading is when the
//     snapshot was complete. A batch without readings takes Options.Now.
package payload

import (
	"fmt"
	"strings"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Format is a subscription's payload_format.
type Format string

// Payload formats (§2). Custom is the default.
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
