// Package dest holds the connections of the agent's publish destinations
// (roles/agent/publish/dest/README.md): the platform broker, a
// generic MQTT broker, an InfluxDB v2 compatible time-series database and
// three MQTT-over-TLS cloud IoT hubs. A connection only sends; what waits
// for it, in memory or in the offline queue, is the publishing worker's.
package dest

import (
	"errors"
	"fmt"
)

// Message is one payload for a destination.
type Message struct {
	// Topic is the MQTT topic; HTTP destinations ignore it.
	Topic   string
	Payload []byte
}

// ErrNotConnected is wrapped by the errors of a Send made while the
// destination was unreachable: nothing was delivered, and the message
// should wait for the connection to come back.
var ErrNotConnected = errors.New("destination not connected")

// RejectedError says the destination was reachable and refused the
// message itself (an HTTP 4xx, for example). Sending it again may not
// help, so such refusals count towards the offline queue's retry limit.
type RejectedError struct {
	Reason string
}

func (e *RejectedError) Error() string { return "destination refused the message: " + e.Reason }

// Rejectedf builds a *RejectedError.
func Rejectedf(format string, args ...any) error {
	return &RejectedError{Reason: fmt.Sprintf(format, args...)}
}

// IsRejected reports whether err is, or wraps, a *RejectedError.
func IsRejected(err error) bool {
	var r *RejectedError
	return errors.As(err, &r)
}
