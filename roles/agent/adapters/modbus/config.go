package modbus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Limits of the Modbus application protocol for one read request.
const (
	maxRegisterCount = 125
	maxBitCount      = 2000
)

// Connection defaults; see README.md.
const (
	defaultPort      = 502
	defaultUnit      = 1
	defaultTimeoutMS = 1000
	defaultBaudRate  = 9600
	defaultDataBits  = 8
	// The Modbus over Serial Line specification makes even parity the
	// default, and mbpoll and most PLCs follow it.
	defaultParity   = "E"
	defaultStopBits = 1
	defaultMaxGap   = 16
)

// Config is the decoded "connection" object of a Modbus endpoint, with
// every default applied.
type Config struct {
	Transport  string `json:"transport"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	UnitID     int    `json:"unitId"`
	TimeoutMS  int    `json:"timeoutMs"`
	SerialPort string `json:"serialPort"`
	BaudRate   int    `json:"baudRate"`
	DataBits   int    `json:"dataBits"`
	Parity     string `json:"parity"`
	StopBits   int    `json:"stopBits"`
	ByteOrder  string `json:"byteOrder"`
	WordOrder  string `json:"wordOrder"`
	// MaxGap is the largest hole, in registers (bits for coils and
	// discrete inputs), that still joins two data points into one request.
	MaxGap int `json:"maxGap"`
	// MaxCount caps the registers of one request, MaxBitCount the bits.
	MaxCount    int `json:"maxCount"`
	MaxBitCount int `json:"maxBitCount"`
}

// Timeout is the per-request time-out.
func (c Config) Timeout() time.Duration { return time.Duration(c.TimeoutMS) * time.Millisecond }

// Address is what the adapter dials: host:port or the serial device.
func (c Config) Address() string {
	if c.Transport == "rtu" {
		return c.SerialPort
	}
	return joinHostPort(c.Host, c.Port)
}

func defaultConfig() Config {
	return Config{
		Transport: "tcp", Port: defaultPort, UnitID: defaultUnit, TimeoutMS: defaultTimeoutMS,
		BaudRate: defaultBaudRate, DataBits: defaultDataBits, Parity: defaultParity, StopBits: defaultStopBits,
		ByteOrder: "big", WordOrder: "big",
		MaxGap: defaultMaxGap, MaxCount: maxRegisterCount, MaxBitCount: maxBitCount,
	}
}

// ParseConfig decodes a connection object strictly: every key must be
// known, every value of the right JSON type and in range. All problems are
// reported at once as *adapters.FieldError joined with errors.Join.
func ParseConfig(raw json.RawMessage) (Config, error) {
	c := defaultConfig()
	// Fields are decoded one by one (adapters.DecodeObject), so that every
	// bad key gets its own path instead of the first error hiding the rest.
	errs, object := adapters.DecodeObject(raw, "connection", map[string]any{
		"transport": &c.Transport, "host": &c.Host, "port": &c.Port, "unitId": &c.UnitID,
		"timeoutMs": &c.TimeoutMS, "serialPort": &c.SerialPort, "baudRate": &c.BaudRate,
		"dataBits": &c.DataBits, "parity": &c.Parity, "stopBits": &c.StopBits,
		"byteOrder": &c.ByteOrder, "wordOrder": &c.WordOrder, "maxGap": &c.MaxGap,
		"maxCount": &c.MaxCount, "maxBitCount": &c.MaxBitCount,
	})
	if !object {
		return c, errs[0]
	}
	fail := func(field, format string, args ...any) {
		errs = append(errs, adapters.Fieldf("connection."+field, format, args...))
	}
	c.Transport = strings.ToLower(c.Transport)
	switch c.Transport {
	case "tcp":
		if c.Host == "" {
			fail("host", "required for transport tcp")
		}
		if c.Port < 1 || c.Port > 65535 {
			fail("port", "%d is out of range 1..65535", c.Port)
		}
	case "rtu":
		if c.SerialPort == "" {
			fail("serialPort", "required for transport rtu")
		}
		if c.BaudRate <= 0 {
			fail("baudRate", "must be positive, got %d", c.BaudRate)
		}
		if c.DataBits < 5 || c.DataBits > 8 {
			fail("dataBits", "%d is out of range 5..8", c.DataBits)
		}
		c.Parity = strings.ToUpper(c.Parity)
		if c.Parity != "N" && c.Parity != "E" && c.Parity != "O" {
			fail("parity", "%q: want N, E or O", c.Parity)
		}
		if c.StopBits != 1 && c.StopBits != 2 {
			fail("stopBits", "%d: want 1 or 2", c.StopBits)
		}
	default:
		fail("transport", "%q: want tcp or rtu", c.Transport)
	}
	if c.UnitID < 0 || c.UnitID > MaxUnit {
		fail("unitId", "%d is out of range 0..%d", c.UnitID, MaxUnit)
	}
	if c.TimeoutMS <= 0 {
		fail("timeoutMs", "must be positive, got %d", c.TimeoutMS)
	}
	var err error
	if c.ByteOrder, err = parseOrder(c.ByteOrder); err != nil {
		fail("byteOrder", "%v", err)
	}
	if c.WordOrder, err = parseOrder(c.WordOrder); err != nil {
		fail("wordOrder", "%v", err)
	}
	if c.MaxGap < 0 || c.MaxGap > maxBitCount {
		fail("maxGap", "%d is out of range 0..%d", c.MaxGap, maxBitCount)
	}
	if c.MaxCount < 1 || c.MaxCount > maxRegisterCount {
		fail("maxCount", "%d is out of range 1..%d", c.MaxCount, maxRegisterCount)
	}
	if c.MaxBitCount < 1 || c.MaxBitCount > maxBitCount {
		fail("maxBitCount", "%d is out of range 1..%d", c.MaxBitCount, maxBitCount)
	}
	return c, errors.Join(errs...)
}

// parseOrder normalises a byte or word order; "" means big, the Modbus
// wire order.
func parseOrder(s string) (string, error) {
	switch strings.ToLower(s) {
	case "", "big":
		return "big", nil
	case "little":
		return "little", nil
	}
	return "", fmt.Errorf("%q: want big or little", s)
}
