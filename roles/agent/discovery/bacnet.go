package discovery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet"
)

// Caps and defaults of a BACnet scan (docs/discovery.md, section BACnet).
const (
	BACnetDefaultWindowMS  = 3000
	bacnetMaxWindowMS      = 30000
	BACnetDefaultRate      = 20 // object reads per second, across devices
	BACnetMaxRate          = 100
	BACnetDefaultDevices   = 100
	bacnetMaxDevices       = 1000
	bacnetDefaultTimeoutMS = 3000
	bacnetMaxTimeoutMS     = 30000
	bacnetDefaultPort      = 47808
	// bacnetValidateWindow is how long a validation waits for a found
	// device's I-Am to a Who-Is addressed to it alone.
	bacnetValidateWindow = time.Second
)

// BACnetScanner finds BACnet/IP devices with bacnet.WhoIs: a Who-Is
// (broadcast, unicast to a target, or through a BBMD), the I-Am answers
// of a window, then each device's object list and object names, paced.
type BACnetScanner struct{}

// Protocol implements Scanner.
func (BACnetScanner) Protocol() string { return bacnet.Protocol }

// BACnetOptions are the options of a BACnet scan.
type BACnetOptions struct {
	// Target sends the Who-Is to one address ("host" or "host:port")
	// instead of broadcasting it.
	Target string `json:"target"`
	// BroadcastAddress is where a broadcast goes ("host:port"; default
	// 255.255.255.255:47808).
	BroadcastAddress string       `json:"broadcastAddress"`
	BBMD             *bacnet.BBMD `json:"bbmd"`
	// Low and High limit the device instances asked for (both 0: all).
	Low               int  `json:"low"`
	High              int  `json:"high"`
	LocalPort         int  `json:"localPort"`
	WindowMS          int  `json:"windowMs"`
	TimeoutMS         int  `json:"timeoutMs"`
	RequestsPerSecond int  `json:"requestsPerSecond"`
	MaxDevices        int  `json:"maxDevices"`
	SkipObjects       bool `json:"skipObjects"`
}

type bacnetPlan struct {
	opts bacnet.WhoIsOptions
}

// Plan implements Scanner. A scan with no target broadcasts: BACnet
// devices answer a broadcast Who-Is, so the configured endpoints are not
// needed to find them.
func (BACnetScanner) Plan(raw json.RawMessage, _ []json.RawMessage) (Plan, error) {
	var o BACnetOptions
	if err := decodeOptions(raw, &o); err != nil {
		return nil, err
	}
	var errs []error
	fail := func(field, format string, args ...any) { errs = append(errs, adapters.Fieldf(field, format, args...)) }
	checkAddr := func(field, v string) {
		if v == "" {
			return
		}
		host, port := v, ""
		if h, p, err := net.SplitHostPort(v); err == nil {
			host, port = h, p
		}
		if n, err := strconv.Atoi(cmp.Or(port, "1")); host == "" || err != nil || n < 1 || n > 65535 {
			fail(field, "must be host or host:port, got %q", v)
		}
	}
	checkAddr("target", o.Target)
	checkAddr("broadcastAddress", o.BroadcastAddress)
	if o.BBMD != nil {
		if o.BBMD.Host == "" {
			fail("bbmd.host", "required")
		}
		if o.BBMD.Port == 0 {
			o.BBMD.Port = bacnetDefaultPort
		}
		if o.BBMD.Port < 1 || o.BBMD.Port > 65535 {
			fail("bbmd.port", "must be 1..65535, got %d", o.BBMD.Port)
		}
		if o.BBMD.TTLSeconds == 0 {
			o.BBMD.TTLSeconds = 60
		}
		if o.BBMD.TTLSeconds < 1 || o.BBMD.TTLSeconds > 65535 {
			fail("bbmd.ttlSeconds", "must be 1..65535, got %d", o.BBMD.TTLSeconds)
		}
	}
	const maxInstance = 4194303
	if o.Low < 0 || o.Low > maxInstance || o.High < 0 || o.High > maxInstance || o.Low > o.High {
		fail("low", "low and high must be 0..%d with low <= high, got %d and %d", maxInstance, o.Low, o.High)
	}
	if o.LocalPort < 0 || o.LocalPort > 65535 {
		fail("localPort", "must be 0..65535, got %d", o.LocalPort)
	}
	window, timeout := cmp.Or(o.WindowMS, BACnetDefaultWindowMS), cmp.Or(o.TimeoutMS, bacnetDefaultTimeoutMS)
	if window < 100 || window > bacnetMaxWindowMS {
		fail("windowMs", "must be 100..%d, got %d", bacnetMaxWindowMS, window)
	}
	if timeout < 100 || timeout > bacnetMaxTimeoutMS {
		fail("timeoutMs", "must be 100..%d, got %d", bacnetMaxTimeoutMS, timeout)
	}
	rate := cmp.Or(o.RequestsPerSecond, BACnetDefaultRate)
	if rate < 1 || rate > BACnetMaxRate {
		fail("requestsPerSecond", "must be 1..%d, got %d", BACnetMaxRate, rate)
	}
	devices := cmp.Or(o.MaxDevices, BACnetDefaultDevices)
	if devices < 1 || devices > bacnetMaxDevices {
		fail("maxDevices", "must be 1..%d, got %d", bacnetMaxDevices, devices)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &bacnetPlan{opts: bacnet.WhoIsOptions{
		Target: o.Target, BroadcastAddress: o.BroadcastAddress, BBMD: o.BBMD, Low: o.Low, High: o.High,
		LocalPort: o.LocalPort, Window: time.Duration(window) * time.Millisecond, Timeout: time.Duration(timeout) * time.Millisecond,
		RequestsPerSecond: float64(rate), MaxDevices: devices, SkipObjects: o.SkipObjects,
	}}, nil
}

// bacnetIdentity: a device instance is unique on a BACnet internetwork,
// whatever address the device answers from.
func bacnetIdentity(instance int) string { return "bacnet:" + strconv.Itoa(instance) }

// Covers implements Scanner: the same device instance.
func (BACnetScanner) Covers(conn json.RawMessage, d Device) bool {
	var c struct {
		DeviceInstance *int `json:"deviceInstance"`
	}
	if json.Unmarshal(conn, &c) != nil || c.DeviceInstance == nil {
		return false
	}
	return bacnetIdentity(*c.DeviceInstance) == d.Identity
}

// Scan implements Plan.
func (p *bacnetPlan) Scan(ctx context.Context) ([]Device, error) {
	found, err := bacnet.WhoIs(ctx, p.opts)
	out := make([]Device, 0, len(found))
	for _, f := range found {
		d, ok := bacnetDevice(f)
		if ok {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b Device) int { return cmp.Compare(a.Identity, b.Identity) })
	if err != nil {
		return out, fmt.Errorf("bacnet who-is: %w", err)
	}
	return out, nil
}

func bacnetDevice(f bacnet.DiscoveredDevice) (Device, bool) {
	host, port, err := net.SplitHostPort(f.Address)
	if err != nil {
		return Device{}, false
	}
	portN, _ := strconv.Atoi(port)
	conn, _ := json.Marshal(map[string]any{"host": host, "port": portN, "deviceInstance": f.Instance})
	name := f.Name
	if name == "" {
		name = "bacnet-" + strconv.FormatUint(uint64(f.Instance), 10)
	}
	details := map[string]any{"vendorId": f.VendorID, "maxApdu": f.MaxAPDU, "segmentation": f.Segmentation}
	if len(f.Objects) > 0 {
		details["objects"] = f.Objects
	}
	if f.Truncated {
		details["truncated"] = true
	}
	if f.Error != "" {
		details["error"] = f.Error
	}
	return Device{Protocol: bacnet.Protocol, Name: name, Connection: conn, Identity: bacnetIdentity(int(f.Instance)), Details: details}, true
}

// Validate implements Plan: a Who-Is addressed to each device and limited
// to its instance must be answered again.
func (p *bacnetPlan) Validate(ctx context.Context, devs []Device) {
	for i := range devs {
		var c struct {
			Host           string `json:"host"`
			Port           int    `json:"port"`
			DeviceInstance int    `json:"deviceInstance"`
		}
		if json.Unmarshal(devs[i].Connection, &c) != nil {
			continue
		}
		o := p.opts
		o.Target, o.BBMD = net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), nil
		o.Low, o.High, o.Window, o.SkipObjects = c.DeviceInstance, c.DeviceInstance, bacnetValidateWindow, true
		again, err := bacnet.WhoIs(ctx, o)
		devs[i].Validated = err == nil && slices.ContainsFunc(again, func(f bacnet.DiscoveredDevice) bool { return int(f.Instance) == c.DeviceInstance })
	}
}

var (
	_ Scanner = BACnetScanner{}
	_ Plan    = (*bacnetPlan)(nil)
)
