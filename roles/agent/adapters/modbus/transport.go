package modbus

import (
	"time"

	"github.com/goburrow/modbus"
)

// transport is the part of a goburrow client handler the adapter drives.
// It is an interface so that unit tests can stand in for a device that
// answers with exceptions or garbage.
type transport interface {
	modbus.Client
	setUnit(uint8)
	setTimeout(time.Duration)
	Connect() error
	Close() error
}

// dialGoburrow builds, but does not connect, a goburrow handler for cfg.
func dialGoburrow(cfg Config) transport {
	if cfg.Transport == "rtu" {
		h := modbus.NewRTUClientHandler(cfg.SerialPort)
		h.BaudRate = cfg.BaudRate
		h.DataBits = cfg.DataBits
		h.Parity = cfg.Parity
		h.StopBits = cfg.StopBits
		h.SlaveId = byte(cfg.UnitID)
		h.Timeout = cfg.Timeout()
		// The runner owns the connection's life; goburrow's idle timer
		// would close it behind our back and leave a timer running.
		h.IdleTimeout = 0
		return &rtuTransport{Client: modbus.NewClient(h), h: h}
	}
	h := modbus.NewTCPClientHandler(cfg.Address())
	h.SlaveId = byte(cfg.UnitID)
	h.Timeout = cfg.Timeout()
	h.IdleTimeout = 0
	return &tcpTransport{Client: modbus.NewClient(h), h: h}
}

type tcpTransport struct {
	modbus.Client
	h *modbus.TCPClientHandler
}

func (t *tcpTransport) setUnit(u uint8)            { t.h.SlaveId = u }
func (t *tcpTransport) setTimeout(d time.Duration) { t.h.Timeout = d }
func (t *tcpTransport) Connect() error             { return t.h.Connect() }
func (t *tcpTransport) Close() error               { return t.h.Close() }

type rtuTransport struct {
	modbus.Client
	h *modbus.RTUClientHandler
}

func (t *rtuTransport) setUnit(u uint8) { t.h.SlaveId = u }

// setTimeout has effect at the next Connect only: goburrow/serial applies
// the time-out when it opens the port.
func (t *rtuTransport) setTimeout(d time.Duration) { t.h.Timeout = d }
func (t *rtuTransport) Connect() error             { return t.h.Connect() }
func (t *rtuTransport) Close() error               { return t.h.Close() }
