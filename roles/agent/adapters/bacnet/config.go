package bacnet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet/wire"
)

// Connection defaults; see README.md.
const (
	DefaultPort       = 47808
	defaultTimeoutMS  = 3000
	defaultMaxAPDU    = 1476
	defaultTTLSeconds = 300
	// minMaxAPDU is the smallest APDU every BACnet device accepts.
	minMaxAPDU = 50
)

// Config is the decoded "connection" object of a BACnet endpoint, with
// every default applied.
type Config struct {
	Host           string `json:"host"`
	Port           int    `json:"port"`
	DeviceInstance int    `json:"deviceInstance"`
	TimeoutMS      int    `json:"timeoutMs"`
	// LocalPort is the UDP port the adapter sends from and listens on;
	// 0 picks a free one.
	LocalPort int `json:"localPort"`
	// BBMD, when set, registers the adapter as a foreign device.
	BBMD *BBMD `json:"bbmd,omitempty"`
	// MaxAPDU caps the APDU the adapter sends and asks for; the device's
	// own max-apdu-length-accepted lowers it further.
	MaxAPDU             int  `json:"maxApdu"`
	UsePropertyMultiple bool `json:"usePropertyMultiple"`
}

// BBMD is a BACnet Broadcast Management Device to register with.
type BBMD struct {
	Host       string `json:"host"`
	Port       int    `json:"port"`
	TTLSeconds int    `json:"ttlSeconds"`
}

// Timeout is the time-out of one confirmed request.
func (c Config) Timeout() time.Duration { return time.Duration(c.TimeoutMS) * time.Millisecond }

// Address is the device's host:port.
func (c Config) Address() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

func defaultConfig() Config {
	return Config{Port: DefaultPort, DeviceInstance: -1, TimeoutMS: defaultTimeoutMS, MaxAPDU: defaultMaxAPDU, UsePropertyMultiple: true}
}

// ParseConfig decodes a connection object strictly: every key must be
// known, every value of the right JSON type and in range. All problems are
// reported at once as *adapters.FieldError joined with errors.Join.
func ParseConfig(raw json.RawMessage) (Config, error) {
	c := defaultConfig()
	var bbmd json.RawMessage
	errs, _ := adapters.DecodeObject(raw, "connection", map[string]any{
		"host": &c.Host, "port": &c.Port, "deviceInstance": &c.DeviceInstance, "timeoutMs": &c.TimeoutMS,
		"localPort": &c.LocalPort, "bbmd": &bbmd, "maxApdu": &c.MaxAPDU, "usePropertyMultiple": &c.UsePropertyMultiple,
	})
	fail := func(field, format string, args ...any) {
		errs = append(errs, adapters.Fieldf("connection."+field, format, args...))
	}
	if c.Host == "" {
		fail("host", "required")
	}
	checkPort := func(field string, p, low int) {
		if p < low || p > 65535 {
			fail(field, "%d is out of range %d..65535", p, low)
		}
	}
	checkPort("port", c.Port, 1)
	checkPort("localPort", c.LocalPort, 0)
	switch {
	case c.DeviceInstance == -1:
		fail("deviceInstance", "required: the device object's instance number")
	case c.DeviceInstance < 0 || c.DeviceInstance >= wire.MaxInstance:
		fail("deviceInstance", "%d is out of range 0..%d", c.DeviceInstance, wire.MaxInstance-1)
	}
	if c.TimeoutMS <= 0 {
		fail("timeoutMs", "must be positive, got %d", c.TimeoutMS)
	}
	if c.MaxAPDU < minMaxAPDU || c.MaxAPDU > defaultMaxAPDU {
		fail("maxApdu", "%d is out of range %d..%d", c.MaxAPDU, minMaxAPDU, defaultMaxAPDU)
	}
	if len(bbmd) > 0 && string(bytes.TrimSpace(bbmd)) != "null" {
		b := BBMD{Port: DefaultPort, TTLSeconds: defaultTTLSeconds}
		bbmdErrs, _ := adapters.DecodeObject(bbmd, "connection.bbmd", map[string]any{
			"host": &b.Host, "port": &b.Port, "ttlSeconds": &b.TTLSeconds,
		})
		errs = append(errs, bbmdErrs...)
		if b.Host == "" {
			fail("bbmd.host", "required")
		}
		checkPort("bbmd.port", b.Port, 1)
		// A registration shorter than a few seconds would keep the link
		// busy re-registering; the BBMD adds its own 30 s grace period.
		if b.TTLSeconds < 10 || b.TTLSeconds > 65535 {
			fail("bbmd.ttlSeconds", "%d is out of range 10..65535", b.TTLSeconds)
		}
		c.BBMD = &b
	}
	return c, errors.Join(errs...)
}

// Register is a parsed data point address:
// <object-type>:<instance>[/<property>][@<priority>].
type Register struct {
	Object   wire.ObjectID
	Property wire.PropertyID
	// Priority is the write priority 1..16; 0 means the default, 16.
	Priority uint8
}

func (r Register) String() string {
	s := r.Object.String()
	if r.Property != wire.PropPresentValue {
		s += "/" + r.Property.String()
	}
	if r.Priority != 0 {
		s += "@" + strconv.Itoa(int(r.Priority))
	}
	return s
}

// objectTypes are the spellings a register accepts: the standard name and
// the abbreviations BACnet tools print.
var objectTypes = map[string]wire.ObjectType{
	"analog-input": wire.AnalogInput, "ai": wire.AnalogInput,
	"analog-output": wire.AnalogOutput, "ao": wire.AnalogOutput,
	"analog-value": wire.AnalogValue, "av": wire.AnalogValue,
	"binary-input": wire.BinaryInput, "bi": wire.BinaryInput,
	"binary-output": wire.BinaryOutput, "bo": wire.BinaryOutput,
	"binary-value": wire.BinaryValue, "bv": wire.BinaryValue,
	"multi-state-input": wire.MultiStateInput, "msi": wire.MultiStateInput,
	"multi-state-output": wire.MultiStateOutput, "mso": wire.MultiStateOutput,
	"multi-state-value": wire.MultiStateValue, "msv": wire.MultiStateValue,
}

// kind is what a present-value of an object type is.
type kind uint8

const (
	analog kind = iota + 1
	binary
	multiState
)

func kindOf(t wire.ObjectType) kind {
	switch t {
	case wire.AnalogInput, wire.AnalogOutput, wire.AnalogValue:
		return analog
	case wire.BinaryInput, wire.BinaryOutput, wire.BinaryValue:
		return binary
	case wire.MultiStateInput, wire.MultiStateOutput, wire.MultiStateValue:
		return multiState
	}
	return 0
}

// ParseRegister parses "<object-type>:<instance>[/<property>][@<priority>]",
// e.g. "analog-input:1", "av:3/units", "analog-output:2@8". Type and
// property names are lower case, as BACnet spells them.
func ParseRegister(s string) (Register, error) {
	r := Register{Property: wire.PropPresentValue}
	rest := s
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		p, err := strconv.ParseUint(rest[i+1:], 10, 8)
		if err != nil || p < 1 || p > 16 {
			return r, fmt.Errorf("%q: priority after @ must be 1..16", s)
		}
		r.Priority, rest = uint8(p), rest[:i]
	}
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		p, err := wire.ParsePropertyID(rest[i+1:])
		if err != nil {
			return r, fmt.Errorf("%q: %w", s, err)
		}
		r.Property, rest = p, rest[:i]
	}
	typ, inst, ok := strings.Cut(rest, ":")
	if !ok {
		return r, fmt.Errorf("%q: want <object-type>:<instance>, e.g. analog-input:1", s)
	}
	t, ok := objectTypes[typ]
	if !ok {
		return r, fmt.Errorf("%q: unknown object type %q; want analog-, binary- or multi-state- input, output or value", s, typ)
	}
	n, err := strconv.ParseUint(inst, 10, 32)
	if err != nil || n >= wire.MaxInstance || (len(inst) > 1 && inst[0] == '0') {
		return r, fmt.Errorf("%q: instance must be a decimal number 0..%d", s, wire.MaxInstance-1)
	}
	r.Object = wire.ObjectID{Type: t, Instance: uint32(n)}
	return r, nil
}
