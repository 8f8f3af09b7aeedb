package netx

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestDialCause(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		name  string
		err   error
		cause string
		ok    bool
	}{
		{"refused", refused, syscall.ECONNREFUSED.Error(), true},
		{"wrapped", fmt.Errorf("ping: %w", refused), syscall.ECONNREFUSED.Error(), true},
		{"syscall error wrapped in the dial error", &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("proxy: %w", os.NewSyscallError("connect", syscall.ECONNREFUSED))},
			syscall.ECONNREFUSED.Error(), true},
		{"unknown host", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "db.invalid"}}, "lookup db.invalid: no such host", true},
		{"read, not dial", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, "", false},
		{"not a network error", errors.New("password authentication failed"), "", false},
		{"nil", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cause, ok := DialCause(tc.err)
			if cause != tc.cause || ok != tc.ok {
				t.Errorf("DialCause(%v) = %q, %v; want %q, %v", tc.err, cause, ok, tc.cause, tc.ok)
			}
		})
	}
}

func TestSettingsErrorKeepsCause(t *testing.T) {
	cause := os.NewSyscallError("connect", syscall.ECONNREFUSED)
	var err error = &SettingsError{Msg: "cannot reach Redis at 127.0.0.1:1 (STREAMSTORE_HOST): connection refused", Err: cause}
	if err.Error() != "cannot reach Redis at 127.0.0.1:1 (STREAMSTORE_HOST): connection refused" {
		t.Errorf("Error() = %q", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Error("the cause is not in the chain")
	}
}
