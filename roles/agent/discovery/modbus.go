package discovery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goburrow/modbus"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Caps and defaults of a Modbus TCP scan (docs/discovery.md, section
// Modbus TCP).
const (
	ModbusMaxAddresses      = 256
	ModbusMaxPorts          = 8
	ModbusMaxUnitIDs        = 16
	ModbusDefaultRate       = 100 // probes per second
	ModbusMaxRate           = 500
	ModbusDefaultWorkers    = 16
	ModbusMaxWorkers        = 64
	ModbusDefaultTimeoutMS  = 500
	modbusMinTimeoutMS      = 50
	modbusMaxTimeoutMS      = 10000
	modbusDefaultPort       = 502
	modbusDefaultUnit       = 1
	modbusProtocol          = "modbus"
	modbusGatewayNoPath     = 10
	modbusGatewayNoResponse = 11
)

// ModbusScanner finds Modbus TCP devices: it connects to every address
// and port and reads holding register 0 of every unit id on each port
// that accepts. Probe, when set, is told of each probe (a connect or a
// read) as it starts; tests count them.
type ModbusScanner struct {
	Probe func(addr string, unit int)
}

// Protocol implements Scanner.
func (ModbusScanner) Protocol() string { return modbusProtocol }

// ModbusOptions are the options of a Modbus scan.
type ModbusOptions struct {
	Network     string   `json:"network"`
	Hosts       []string `json:"hosts"`
	Ports       []int    `json:"ports"`
	UnitIDs     []int    `json:"unitIds"`
	TimeoutMS   int      `json:"timeoutMs"`
	Rate        int      `json:"rate"`
	Concurrency int      `json:"concurrency"`
}

type modbusPlan struct {
	hosts   []string
	ports   []int
	units   []int
	timeout time.Duration
	rate    int
	workers int
	probe   func(addr string, unit int)
}

// Plan implements Scanner.
func (s ModbusScanner) Plan(raw json.RawMessage, known []json.RawMessage) (Plan, error) {
	var o ModbusOptions
	if err := decodeOptions(raw, &o); err != nil {
		return nil, err
	}
	p := &modbusPlan{probe: s.Probe, rate: cmp.Or(o.Rate, ModbusDefaultRate), workers: cmp.Or(o.Concurrency, ModbusDefaultWorkers),
		timeout: time.Duration(cmp.Or(o.TimeoutMS, ModbusDefaultTimeoutMS)) * time.Millisecond}
	var errs []error
	fail := func(field, format string, args ...any) { errs = append(errs, adapters.Fieldf(field, format, args...)) }
	if o.Network != "" {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(o.Network))
		switch {
		case err != nil:
			fail("network", "must be a CIDR such as 192.168.1.0/24, got %q", o.Network)
		case pfx.Addr().BitLen()-pfx.Bits() > 8:
			fail("network", "%s holds %s addresses; at most %d are scanned (a /24 of IPv4)", pfx, addrCount(pfx), ModbusMaxAddresses)
		default:
			for a := pfx.Masked().Addr(); pfx.Contains(a); a = a.Next() {
				p.hosts = append(p.hosts, a.String())
			}
		}
	}
	for i, h := range o.Hosts {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, "/ ") {
			fail(fmt.Sprintf("hosts[%d]", i), "must be a host name or address, got %q", h)
			continue
		}
		p.hosts = append(p.hosts, h)
	}
	p.ports = o.Ports
	p.units = o.UnitIDs
	if o.Network == "" && len(o.Hosts) == 0 {
		// No target named: the configured endpoints' own hosts.
		for _, c := range known {
			mc, ok := modbusConn(c)
			if !ok {
				continue
			}
			p.hosts = append(p.hosts, mc.host)
			if o.Ports == nil {
				p.ports = append(p.ports, mc.port)
			}
			if o.UnitIDs == nil {
				p.units = append(p.units, mc.unit)
			}
		}
		if len(p.hosts) == 0 {
			fail("network", "is required (or hosts): no Modbus TCP endpoint is configured to scan the hosts of")
		}
	}
	p.hosts = uniq(p.hosts)
	if len(p.hosts) > ModbusMaxAddresses {
		fail("network", "%d addresses to scan; at most %d", len(p.hosts), ModbusMaxAddresses)
	}
	if len(p.ports) == 0 {
		p.ports = []int{modbusDefaultPort}
	}
	p.ports = uniq(p.ports)
	for i, port := range p.ports {
		if port < 1 || port > 65535 {
			fail(fmt.Sprintf("ports[%d]", i), "must be 1..65535, got %d", port)
		}
	}
	if len(p.ports) > ModbusMaxPorts {
		fail("ports", "at most %d ports, got %d", ModbusMaxPorts, len(p.ports))
	}
	if len(p.units) == 0 {
		p.units = []int{modbusDefaultUnit}
	}
	p.units = uniq(p.units)
	for i, u := range p.units {
		if u < 0 || u > 255 {
			fail(fmt.Sprintf("unitIds[%d]", i), "must be 0..255, got %d", u)
		}
	}
	if len(p.units) > ModbusMaxUnitIDs {
		fail("unitIds", "at most %d unit ids, got %d", ModbusMaxUnitIDs, len(p.units))
	}
	if ms := cmp.Or(o.TimeoutMS, ModbusDefaultTimeoutMS); ms < modbusMinTimeoutMS || ms > modbusMaxTimeoutMS {
		fail("timeoutMs", "must be %d..%d, got %d", modbusMinTimeoutMS, modbusMaxTimeoutMS, ms)
	}
	if p.rate < 1 || p.rate > ModbusMaxRate {
		fail("rate", "must be 1..%d probes per second, got %d", ModbusMaxRate, p.rate)
	}
	if p.workers < 1 || p.workers > ModbusMaxWorkers {
		fail("concurrency", "must be 1..%d, got %d", ModbusMaxWorkers, p.workers)
	}
	if len(errs) == 0 {
		// The connects alone take this long at the rate; a plan that
		// cannot finish within the scan's limit is refused up front.
		if d := time.Duration(len(p.hosts)*len(p.ports)) * time.Second / time.Duration(p.rate); d > MaxScanDuration {
			fail("rate", "%d connects at %d per second take %v, over the %v a scan may take; raise rate or scan less", len(p.hosts)*len(p.ports), p.rate, d, MaxScanDuration)
		}
	}
	return p, errors.Join(errs...)
}

func addrCount(p netip.Prefix) string {
	bits := p.Addr().BitLen() - p.Bits()
	if bits >= 63 {
		return "2^" + strconv.Itoa(bits)
	}
	return strconv.FormatInt(1<<bits, 10)
}

func uniq[T cmp.Ordered](xs []T) []T {
	seen := map[T]bool{}
	out := xs[:0:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

type modbusTarget struct {
	host string
	port int
	unit int
}

// modbusConn reads host, port and unitId of a Modbus TCP connection
// object with the adapter's defaults; an RTU connection is no target.
func modbusConn(raw json.RawMessage) (modbusTarget, bool) {
	var c struct {
		Transport string `json:"transport"`
		Host      string `json:"host"`
		Port      *int   `json:"port"`
		UnitID    *int   `json:"unitId"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Host == "" || (c.Transport != "" && c.Transport != "tcp") {
		return modbusTarget{}, false
	}
	t := modbusTarget{host: c.Host, port: modbusDefaultPort, unit: modbusDefaultUnit}
	if c.Port != nil {
		t.port = *c.Port
	}
	if c.UnitID != nil {
		t.unit = *c.UnitID
	}
	return t, true
}

func (t modbusTarget) identity() string {
	return fmt.Sprintf("modbus:%s:%d:%d", strings.ToLower(t.host), t.port, t.unit)
}

// Covers implements Scanner: same host, port and unit id.
func (ModbusScanner) Covers(conn json.RawMessage, d Device) bool {
	t, ok := modbusConn(conn)
	return ok && t.identity() == d.Identity
}

// Scan implements Plan: workers take one host:port each, connect, and
// read holding register 0 of each unit id over that connection; every
// connect and every read waits for the rate limiter.
func (p *modbusPlan) Scan(ctx context.Context) ([]Device, error) {
	lim := newLimiter(p.rate)
	jobs := make(chan modbusTarget)
	var mu sync.Mutex
	var found []Device
	var wg sync.WaitGroup
	for range min(p.workers, len(p.hosts)*len(p.ports)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range jobs {
				devs := p.probeHost(ctx, lim, t)
				mu.Lock()
				found = append(found, devs...)
				mu.Unlock()
			}
		}()
	}
feed:
	for _, h := range p.hosts {
		for _, port := range p.ports {
			select {
			case jobs <- modbusTarget{host: h, port: port}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	slices.SortFunc(found, func(a, b Device) int { return cmp.Compare(a.Identity, b.Identity) })
	return found, ctx.Err()
}

// probeHost probes the unit ids of one host:port; a refused or silent
// port ends it after one connect.
func (p *modbusPlan) probeHost(ctx context.Context, lim *limiter, t modbusTarget) []Device {
	addr := net.JoinHostPort(t.host, strconv.Itoa(t.port))
	if lim.wait(ctx) != nil {
		return nil
	}
	p.note(addr, -1)
	h := modbus.NewTCPClientHandler(addr)
	h.Timeout = p.timeout
	if err := h.Connect(); err != nil {
		return nil
	}
	defer h.Close()
	// A scan cancelled mid-read does not wait out the probe's time-out.
	stop := context.AfterFunc(ctx, func() { _ = h.Close() })
	defer stop()
	client := modbus.NewClient(h)
	var out []Device
	for _, u := range p.units {
		if lim.wait(ctx) != nil {
			break
		}
		p.note(addr, u)
		h.SlaveId = byte(u)
		t.unit = u
		if d, ok := modbusAnswer(client, t); ok {
			out = append(out, d)
		}
	}
	return out
}

func (p *modbusPlan) note(addr string, unit int) {
	if p.probe != nil {
		p.probe(addr, unit)
	}
}

// modbusAnswer reads holding register 0 of t.unit: an answer, or an
// exception other than a gateway's "no such unit" (10, 11), proves a
// device is there.
func modbusAnswer(client modbus.Client, t modbusTarget) (Device, bool) {
	res, err := client.ReadHoldingRegisters(0, 1)
	details := map[string]any{}
	var me *modbus.ModbusError
	switch {
	case err == nil && len(res) == 2:
		details["holdingRegister0"] = int(res[0])<<8 | int(res[1])
	case errors.As(err, &me) && me.ExceptionCode != modbusGatewayNoPath && me.ExceptionCode != modbusGatewayNoResponse:
		details["exception"] = int(me.ExceptionCode)
	default:
		return Device{}, false
	}
	conn, _ := json.Marshal(map[string]any{"host": t.host, "port": t.port, "unitId": t.unit})
	return Device{Protocol: modbusProtocol, Name: fmt.Sprintf("modbus-%s-%d-unit%d", t.host, t.port, t.unit),
		Connection: conn, Identity: t.identity(), Details: details}, true
}

// Validate implements Plan: one more read per device, rate-limited.
func (p *modbusPlan) Validate(ctx context.Context, devs []Device) {
	lim := newLimiter(p.rate)
	for i := range devs {
		t, ok := modbusConn(devs[i].Connection)
		if !ok || lim.wait(ctx) != nil {
			continue
		}
		addr := net.JoinHostPort(t.host, strconv.Itoa(t.port))
		p.note(addr, t.unit)
		h := modbus.NewTCPClientHandler(addr)
		h.Timeout = p.timeout
		h.SlaveId = byte(t.unit)
		if h.Connect() != nil {
			continue
		}
		_, devs[i].Validated = modbusAnswer(modbus.NewClient(h), t)
		_ = h.Close()
	}
}

var (
	_ Scanner = ModbusScanner{}
	_ Plan    = (*modbusPlan)(nil)
)
