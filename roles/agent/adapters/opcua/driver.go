// Package opcua is the agent's OPC-UA protocol adapter: it reads the nodes
// an endpoint names with one Read request per poll, or with monitored items
// of one subscription when the endpoint asks for subscribe, and it browses
// a server's address space for POST /v1/discover/opcua/browse.
//
// Reconnection belongs to the endpoint runner, so gopcua's own automatic
// reconnect is switched off: a lost session surfaces as an error from Poll
// or Listen and the runner closes the adapter and connects it again.
package opcua

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/gopcua/opcua/ua"
)

// Protocol is the endpoint "protocol" value of this adapter.
const Protocol = "opcua"

// Driver validates OPC-UA endpoints and builds their adapters.
type Driver struct{}

// Protocol returns "opcua".
func (Driver) Protocol() string { return Protocol }

// Validate checks the connection object and the data points without I/O.
func (Driver) Validate(ep adapters.Endpoint) error {
	var errs []error
	if ep.Protocol != "" && ep.Protocol != Protocol {
		errs = append(errs, adapters.Fieldf("protocol", "must be %q for this driver", Protocol))
	}
	conn, err := decodeConnection(ep.Connection)
	if err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, conn.validate("connection.")...)
	}
	_, dpErrs := parseDataPoints(ep.DataPoints)
	errs = append(errs, dpErrs...)
	return errors.Join(errs...)
}

// New builds an adapter for a validated endpoint without I/O.
func (d Driver) New(ep adapters.Endpoint, env adapters.Env) (adapters.Adapter, error) {
	if err := d.Validate(ep); err != nil {
		return nil, fmt.Errorf("opcua endpoint %q: %w", ep.Name, err)
	}
	conn, _ := decodeConnection(ep.Connection)
	points, _ := parseDataPoints(ep.DataPoints)
	logger := env.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Adapter{
		ep:     ep,
		conn:   conn.withDefaults(),
		points: points,
		log:    logger.With("protocol", Protocol, "endpoint", ep.Name),
	}, nil
}

// point is a data point with its parsed node id and value type.
type point struct {
	adapters.DataPoint
	node *ua.NodeID
	// nsURI is the namespace of an "nsu=<uri>;..." register; its index is
	// looked up in the server's namespace array at every Connect, since a
	// server may number its namespaces differently after a restart.
	nsURI string
	kind  string // "", "bool", "int", "float" or "string"
}

// parseRegister parses a node id without I/O. The "nsu=" form is checked
// here and resolved against the server at Connect.
func parseRegister(s string) (*ua.NodeID, string, error) {
	rest, isURI := strings.CutPrefix(s, "nsu=")
	if !isURI {
		n, err := ua.ParseNodeID(s)
		return n, "", err
	}
	uri, id, ok := strings.Cut(rest, ";")
	if !ok || uri == "" {
		return nil, "", errors.New("nsu= needs a namespace URI and an identifier: nsu=<uri>;s=<name>")
	}
	n, err := ua.ParseNodeID(id)
	if err != nil {
		return nil, "", err
	}
	if n.Namespace() != 0 {
		return nil, "", errors.New("give nsu= or ns=, not both")
	}
	return n, uri, nil
}

func parseDataPoints(dps []adapters.DataPoint) ([]point, []error) {
	var errs []error
	points := make([]point, 0, len(dps))
	seen := make(map[string]int, len(dps))
	for i, dp := range dps {
		field := fmt.Sprintf("data_points[%d]", i)
		p := point{DataPoint: dp}
		switch prev, dup := seen[dp.Name]; {
		case dp.Name == "":
			errs = append(errs, adapters.Fieldf(field+".name", "is required"))
		case dup:
			errs = append(errs, adapters.Fieldf(field+".name", "duplicates data_points[%d].name %q", prev, dp.Name))
		default:
			seen[dp.Name] = i
		}
		if dp.Register == "" {
			errs = append(errs, adapters.Fieldf(field+".register", "is required (an OPC-UA node id such as ns=2;s=Temperature)"))
		} else if n, uri, err := parseRegister(dp.Register); err != nil {
			errs = append(errs, adapters.Fieldf(field+".register", "is not an OPC-UA node id: %v", err))
		} else {
			p.node, p.nsURI = n, uri
		}
		kind, ok := valueTypes[dp.Type]
		if !ok {
			errs = append(errs, adapters.Fieldf(field+".type", "must be one of auto, bool, int, int16, int32, int64, uint16, uint32, uint64, float, float32, float64, double or string"))
		}
		p.kind = kind
		if dp.Scale != nil && (math.IsNaN(*dp.Scale) || math.IsInf(*dp.Scale, 0) || *dp.Scale == 0) {
			errs = append(errs, adapters.Fieldf(field+".scale", "must be a finite number other than 0"))
		}
		points = append(points, p)
	}
	return points, errs
}
