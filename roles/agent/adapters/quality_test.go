package adapters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"refused", refused, CodeConnectionRefused},
		{"wrapped refused", fmt.Errorf("read holding 0: %w", refused), CodeConnectionRefused},
		{"dns", &net.DNSError{Err: "no such host", Name: "plc.invalid", IsNotFound: true}, CodeHostNotFound},
		{"dns timeout", &net.DNSError{Err: "timeout", Name: "plc", IsTimeout: true}, CodeTimeout},
		{"deadline", context.DeadlineExceeded, CodeTimeout},
		{"i/o timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, CodeTimeout},
		{"reset", &net.OpError{Op: "read", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}, CodeDeviceOffline},
		{"eof", fmt.Errorf("modbus: %w", io.EOF), CodeDeviceOffline},
		{"unreachable", syscall.EHOSTUNREACH, CodeDeviceOffline},
		{"serial port missing", &os.PathError{Op: "open", Path: "/dev/ttyUSB9", Err: syscall.ENOENT}, CodeDeviceOffline},
		{"explicit busy", WithCode(CodeDeviceBusy, errors.New("exception 6")), CodeDeviceBusy},
		{"explicit wins over wrapped", WithCode(CodeBadData, fmt.Errorf("x: %w", io.EOF)), CodeBadData},
		{"other", errors.New("something odd"), CodeReadError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestClassifyRealRefusal(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, err = net.DialTimeout("tcp", addr, time.Second)
	if got := Classify(err); got != CodeConnectionRefused {
		t.Fatalf("dial to a closed port: Classify(%v) = %q, want %q", err, got, CodeConnectionRefused)
	}
}

func TestBadReading(t *testing.T) {
	at := time.Unix(1700000000, 0)
	r := BadReading("plc-1", "u1", DataPoint{Name: "temp", Unit: "C"}, at, WithCode(CodeDeviceBusy, errors.New("busy")))
	if r.Value != nil || r.Quality != Bad || r.QualityCode != CodeDeviceBusy || r.Metric != "temp" || r.Unit != "C" || !r.Timestamp.Equal(at) {
		t.Fatalf("BadReading = %+v", r)
	}
}

func TestFieldsOf(t *testing.T) {
	err := errors.Join(Fieldf("connection.port", "bad"), fmt.Errorf("data point: %w", Fieldf("data_points[0].register", "bad")),
		errors.Join(Fieldf("name", "missing")), errors.New("odd"))
	got := FieldsOf(err)
	want := []string{"?odd", "connection.port", "data_points[0].register", "name"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("FieldsOf = %v, want %v", got, want)
	}
	if FieldsOf(nil) != nil {
		t.Fatal("FieldsOf(nil) is not empty")
	}
}
