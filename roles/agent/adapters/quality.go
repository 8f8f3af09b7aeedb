package adapters

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Quality codes of a BAD reading (docs/agent.md, section Connection
// states, outages and quality).
const (
	CodeTimeout           = "TIMEOUT"
	CodeConnectionRefused = "CONNECTION_REFUSED"
	CodeHostNotFound      = "HOST_NOT_FOUND"
	CodeDeviceOffline     = "DEVICE_OFFLINE"
	CodeDeviceBusy        = "DEVICE_BUSY"
	CodeBadData           = "BAD_DATA"
	CodeReadError         = "READ_ERROR"
	// CodeDeviceFault and CodeOutOfService are values the device itself
	// marks as untrustworthy: a BACnet object whose status-flags has
	// fault set or whose reliability is not no-fault-detected, and one
	// that is out of service (its value is not the process's).
	CodeDeviceFault  = "DEVICE_FAULT"
	CodeOutOfService = "OUT_OF_SERVICE"
)

// QualityError carries a quality code an adapter knows better than
// Classify could guess: a Modbus exception 6 is DEVICE_BUSY, a response
// that does not decode is BAD_DATA.
type QualityError struct {
	Code string
	Err  error
}

func (e *QualityError) Error() string { return e.Code + ": " + e.Err.Error() }
func (e *QualityError) Unwrap() error { return e.Err }

// WithCode wraps err with an explicit quality code.
func WithCode(code string, err error) error {
	if err == nil {
		return nil
	}
	return &QualityError{Code: code, Err: err}
}

// Classify derives the quality code of a failed read from the real error.
// An explicit QualityError wins; otherwise the network error decides: a
// refused connection, an unresolvable host, a time-out, or a peer that is
// unreachable or went away (DEVICE_OFFLINE). Anything else is READ_ERROR.
func Classify(err error) string {
	if err == nil {
		return ""
	}
	var qe *QualityError
	if errors.As(err, &qe) {
		return qe.Code
	}
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return CodeTimeout
		}
		return CodeHostNotFound
	case errors.Is(err, syscall.ECONNREFUSED):
		return CodeConnectionRefused
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), isTimeout(err):
		return CodeTimeout
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ENODEV), errors.Is(err, syscall.ENXIO):
		// A serial port that does not exist or cannot be opened is an
		// offline device too.
		return CodeDeviceOffline
	}
	return CodeReadError
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
