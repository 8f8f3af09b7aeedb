// Package adapters is the contract between the agent's endpoint runner and
// its protocol adapters. Each protocol lives in a folder of its own
// (modbus/, opcua/, mqtt/) with a README and a sample config, the way
// Telegraf keeps its plugins, and implements Driver and Adapter. The runner
// owns what is the same for every protocol: scheduling, connection state,
// reconnection with backoff, health figures and turning a lost connection
// into BAD readings. An adapter owns only its wire protocol.
package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// Endpoint is one configured protocol endpoint as stored and as the API
// accepts it. Connection is protocol specific and decoded by the driver.
type Endpoint struct {
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	// Connection holds the protocol's connection settings (Modbus: host,
	// port, unitId; OPC-UA: endpointUrl, security; MQTT: brokerUrl, topics).
	Connection json.RawMessage `json:"connection"`
	// PollIntervalMS is how often a polled adapter reads every data point.
	PollIntervalMS int            `json:"poll_interval"`
	Enabled        bool           `json:"enabled"`
	DataPoints     []DataPoint    `json:"data_points"`
	Metadata       map[string]any `json:"metadata,omitempty"`
	// Batching and framing settings (docs/agent.md, section Batching);
	// zero means off or the default.
	BufferSize     int `json:"buffer_size,omitempty"`
	BufferTimeMS   int `json:"buffer_time_ms,omitempty"`
	BufferCapacity int `json:"buffer_capacity,omitempty"`
	// MQTTTopic is where publishing sends this endpoint's batches.
	MQTTTopic string `json:"mqtt_topic,omitempty"`
	// HeartbeatTopic (blank disables) and HeartbeatIntervalS are used by
	// the publishing layer.
	HeartbeatTopic     string `json:"heartbeat_topic,omitempty"`
	HeartbeatIntervalS int    `json:"heartbeat_interval,omitempty"`
}

// DataPoint is one value an endpoint reads. Register is the protocol's
// address of the value: a Modbus "<area>:<index>", an OPC-UA node id, a
// field of an MQTT JSON frame.
type DataPoint struct {
	Name     string   `json:"name"`
	Register string   `json:"register"`
	Type     string   `json:"type,omitempty"`
	Scale    *float64 `json:"scale,omitempty"`
	Unit     string   `json:"unit,omitempty"`
	// ByteOrder and WordOrder ("big" or "little") say how a multi-register
	// Modbus value is laid out; the endpoint's connection may set defaults.
	ByteOrder string `json:"byte_order,omitempty"`
	WordOrder string `json:"word_order,omitempty"`
}

// ScaleOr1 returns the data point's scale, 1 when unset.
func (d DataPoint) ScaleOr1() float64 {
	if d.Scale == nil {
		return 1
	}
	return *d.Scale
}

// Quality of a reading.
const (
	Good = "GOOD"
	Bad  = "BAD"
)

// Reading is one value read from a device, in the shape of the custom
// payload's readings (docs/agent-payloads.md). Value is nil for a BAD
// reading.
type Reading struct {
	DeviceName  string    `json:"deviceName"`
	DeviceID    string    `json:"deviceId"`
	Metric      string    `json:"metric"`
	Value       any       `json:"value"`
	Unit        string    `json:"unit,omitempty"`
	Timestamp   time.Time `json:"timestamp"`
	Quality     string    `json:"quality"`
	QualityCode string    `json:"qualityCode,omitempty"`
	// Protocol and NodeType are set by OPC-UA readings only.
	Protocol string `json:"protocol,omitempty"`
	NodeType string `json:"nodeType,omitempty"`
}

// BadReading is the reading of a data point that could not be read: value
// null, quality BAD and the code Classify derives from err.
func BadReading(device, deviceID string, dp DataPoint, at time.Time, err error) Reading {
	return Reading{
		DeviceName: device, DeviceID: deviceID, Metric: dp.Name, Value: nil, Unit: dp.Unit,
		Timestamp: at, Quality: Bad, QualityCode: Classify(err),
	}
}

// Env is what the runner hands an adapter.
type Env struct {
	Logger *slog.Logger
	// Frame, when set, is handed every complete frame an adapter that
	// frames a byte stream (MQTT) receives, before it is decoded, for
	// schema-drift detection (docs/drift.md). It runs on the adapter's
	// goroutine and must not keep frame.
	Frame func(frame []byte, received time.Time)
}

// Driver validates and builds the adapters of one protocol.
type Driver interface {
	// Protocol is the endpoint "protocol" value this driver serves.
	Protocol() string
	// Validate checks the endpoint's connection and data points without
	// any I/O. Problems are returned as *FieldError (joined with
	// errors.Join when there are several) naming the field.
	Validate(ep Endpoint) error
	// New builds an adapter for a validated endpoint, without I/O.
	New(ep Endpoint, env Env) (Adapter, error)
}

// Adapter talks to the device or server of one endpoint. The runner calls
// its methods from one goroutine, except Diagnostics and Metrics.
type Adapter interface {
	// Connect opens the connection, bounded by ctx. Its error is classified
	// with Classify for the BAD readings and the endpoint's lastError.
	Connect(ctx context.Context) error
	// Poll reads every data point once. A data point that fails alone is a
	// BAD reading; a non-nil error means the connection is gone and the
	// runner closes the adapter and reconnects (readings returned with it
	// are still delivered).
	Poll(ctx context.Context) ([]Reading, error)
	// Close releases the connection. It is safe to call more than once and
	// after a failed Connect.
	Close() error
}

// ErrPollOnly is returned by Listen when the adapter, as configured, is to
// be polled.
var ErrPollOnly = errors.New("adapter is polled")

// Listener is implemented by adapters whose values arrive by themselves
// (MQTT subscriptions, OPC-UA monitored items). After each Connect the
// runner calls Listen instead of polling; Listen returns nil when ctx ends,
// ErrPollOnly at once when this endpoint is configured for polling, and any
// other error when the connection is lost.
type Listener interface {
	Listen(ctx context.Context, emit func([]Reading)) error
}

// Pusher is implemented by a Listener whose configuration decides whether
// it listens (OPC-UA: monitored items or polling). A Listener without it
// always listens. The runner asks once, when the endpoint starts, so an
// endpoint's kind does not depend on whether it has connected yet.
type Pusher interface {
	Pushes() bool
}

// Diagnoser is implemented by adapters with protocol-level detail for
// GET /v1/adapters/:protocol/devices/:deviceName (Modbus: register blocks,
// request counts, the last exception). It must be safe for concurrent use.
type Diagnoser interface {
	Diagnostics() any
}

// Writer is implemented by adapters that write values to the device
// (POST /v1/adapters/modbus/devices/:deviceName/write). value comes from
// JSON; a type mismatch is a *FieldError on "value".
type Writer interface {
	Write(ctx context.Context, register string, value any) (written any, err error)
}

// FieldError is a validation failure of one field, named as a JSON path
// ("data_points[2].register", "connection.port").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Msg) }

// Fieldf builds a *FieldError.
func Fieldf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// FieldsOf lists, sorted, the Field of every *FieldError in err, which may
// be a tree of errors.Join; any other error in it is listed as "?" and its
// text, so a caller comparing field lists sees it.
func FieldsOf(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var fe *FieldError
		if errors.As(e, &fe) {
			out = append(out, fe.Field)
		} else {
			out = append(out, "?"+e.Error())
		}
	}
	walk(err)
	slices.Sort(out)
	return out
}
