// Package netx holds what the clients of the platform's backing services
// (PostgreSQL, Redis) share about failing to reach them: the cause of a
// failed dial and an error whose message is written for the operator.
package netx

import (
	"errors"
	"net"
	"os"
)

// DialCause reports whether err is a failure to open a connection at all
// (refused, unreachable, unknown host, timed out), and its cause without
// the address, which the caller's message names already: "connection
// refused" rather than "dial tcp 127.0.0.1:5433: connect: connection
// refused".
func DialCause(err error) (string, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return "", false
	}
	var sc *os.SyscallError
	if errors.As(op.Err, &sc) {
		return sc.Err.Error(), true
	}
	return op.Err.Error(), true
}

// SettingsError carries a message written for the operator, naming the
// service, its address and the settings to check, and keeps the cause in
// the chain for errors.Is and errors.As.
type SettingsError struct {
	Msg string
	Err error
}

func (e *SettingsError) Error() string { return e.Msg }
func (e *SettingsError) Unwrap() error { return e.Err }
