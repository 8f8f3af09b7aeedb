// Package bacnet is the agent's BACnet/IP adapter.
//
// A poll reads every data point of a device with as few requests as fit:
// points are grouped by object, and the objects are packed into
// ReadPropertyMultiple requests sized so that no answer needs segmentation
// (the adapter asks for unsegmented answers only). A device that does not
// know ReadPropertyMultiple is read with ReadProperty per property from
// then on. Status-flags and reliability are read with each present-value
// and turn a value the device itself distrusts into a BAD reading.
//
// The wire protocol is the package's own (subpackage wire), since no
// maintained Go BACnet library is available; WhoIs discovers devices for
// the discovery service. See README.md for the configuration reference.
package bacnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet/wire"
)

// Protocol is the endpoint "protocol" value of this adapter.
const Protocol = "bacnet"

// Driver builds BACnet adapters. The zero value is ready to use.
type Driver struct{}

// Protocol returns "bacnet".
func (Driver) Protocol() string { return Protocol }

// Validate checks the connection and the data points without any I/O.
func (Driver) Validate(ep adapters.Endpoint) error {
	_, _, err := compile(ep)
	return err
}

// New builds an adapter; it does not connect.
func (Driver) New(ep adapters.Endpoint, env adapters.Env) (adapters.Adapter, error) {
	return NewAdapter(ep, env)
}

func compile(ep adapters.Endpoint) (Config, []point, error) {
	var errs []error
	if ep.Protocol != "" && ep.Protocol != Protocol {
		errs = append(errs, adapters.Fieldf("protocol", "%q is not %q", ep.Protocol, Protocol))
	}
	cfg, err := ParseConfig(ep.Connection)
	errs = append(errs, err)
	points, err := resolvePoints(ep.DataPoints)
	errs = append(errs, err)
	return cfg, points, errors.Join(errs...)
}

// Adapter polls and writes one BACnet device. Connect, Poll, Write and
// Close are serialised by a mutex, because the API's write route runs on
// a goroutine of its own next to the runner's polls; Diagnostics only
// takes the statistics lock and so never waits for a slow device.
type Adapter struct {
	name, id string
	cfg      Config
	points   []point
	byName   map[string]int
	objs     []objectRead
	log      *slog.Logger

	mu   sync.Mutex // serialises requests; guards the fields below
	c    *client
	sess *session
	// units are the reading units of analog objects, read at connect.
	units map[wire.ObjectID]string
	// connErr is why the last Connect failed; a Poll without a client
	// reports it, so its BAD readings carry the real cause.
	connErr error
	// rpmRefused and noReliability outlive a reconnect: the device does
	// not learn ReadPropertyMultiple by being reconnected.
	rpmRefused    bool
	noReliability map[wire.ObjectID]bool

	statsMu sync.Mutex
	stats   stats
}

// NewAdapter validates ep and builds its adapter.
func NewAdapter(ep adapters.Endpoint, env adapters.Env) (*Adapter, error) {
	cfg, points, err := compile(ep)
	if err != nil {
		return nil, fmt.Errorf("bacnet endpoint %q: %w", ep.Name, err)
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &Adapter{
		name: ep.Name, id: ep.UUID, cfg: cfg, points: points,
		byName: make(map[string]int, len(points)), objs: pollObjects(points),
		log: log.With("protocol", Protocol, "endpoint", ep.Name),
	}
	for i, p := range points {
		a.byName[p.dp.Name] = i
	}
	return a, nil
}

// Config returns the decoded connection settings with defaults applied.
func (a *Adapter) Config() Config { return a.cfg }

func (a *Adapter) device() wire.ObjectID {
	return wire.ObjectID{Type: wire.Device, Instance: uint32(a.cfg.DeviceInstance)}
}

// Connect opens the UDP socket, registers with the BBMD when one is
// configured, asks the device for its I-Am and reads its
// max-apdu-length-accepted (which also proves it answers), then the units
// of the analog points. UDP has no connection, so that first read is what
// tells the runner whether the device is there.
func (a *Adapter) Connect(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closeLocked()
	err := a.connectLocked(ctx)
	if err != nil {
		a.closeLocked()
		a.recordError(err, time.Now())
		a.connErr = err
		return err
	}
	a.connErr = nil
	a.statsMu.Lock()
	a.stats.connected = true
	a.statsMu.Unlock()
	return nil
}

func (a *Adapter) connectLocked(ctx context.Context) error {
	peer, err := resolve(ctx, a.cfg.Host, a.cfg.Port)
	if err != nil {
		return fmt.Errorf("bacnet: connect %s: %w", a.cfg.Address(), err)
	}
	c, err := listen(a.cfg.LocalPort, a.cfg.MaxAPDU, a.log, a.onIAm, &a.stats.badFrames)
	if err != nil {
		return err
	}
	a.c = c
	if b := a.cfg.BBMD; b != nil {
		bbmd, err := resolve(ctx, b.Host, b.Port)
		if err != nil {
			return fmt.Errorf("bacnet: bbmd %s: %w", b.Host, err)
		}
		ttl := time.Duration(b.TTLSeconds) * time.Second
		if err := c.register(ctx, bbmd, ttl, a.cfg.Timeout()); err != nil {
			return err
		}
		a.setRegistered(true, nil)
		c.keepRegistered(bbmd, ttl, a.cfg.Timeout(), func(err error) {
			a.log.Warn("foreign device re-registration failed", "bbmd", bbmd, "err", err)
			a.setRegistered(false, err)
		})
	}
	inst := a.cfg.DeviceInstance
	if err := c.whoIs(peer, inst, inst); err != nil {
		return err
	}
	s := &session{
		c: c, peer: peer, timeout: a.cfg.Timeout(), maxAPDU: a.cfg.MaxAPDU,
		useRPM: a.cfg.UsePropertyMultiple, rpmRefused: a.rpmRefused, noReliability: a.noReliability,
	}
	vals, err := s.readProperty(ctx, a.device(), wire.PropertyRef{ID: wire.PropMaxAPDULength, Index: wire.ArrayAll})
	if err != nil && !deviceAnswer(err) {
		return fmt.Errorf("bacnet: connect %s device %d: %w", a.cfg.Address(), inst, err)
	}
	deviceMax := 0
	if len(vals) == 1 {
		if v, ok := vals[0].(uint64); ok && v >= minMaxAPDU {
			deviceMax = int(min(v, defaultMaxAPDU))
			s.maxAPDU = min(s.maxAPDU, deviceMax)
		}
	}
	units := make(map[wire.ObjectID]string)
	if objs := unitObjects(a.points); len(objs) > 0 {
		res, err := s.read(ctx, objs)
		if err != nil {
			return fmt.Errorf("bacnet: read units from %s: %w", a.cfg.Address(), err)
		}
		for _, o := range objs {
			v, err := res[propKey{o.obj, wire.PropUnits}].one()
			if u, ok := v.(wire.Enumerated); ok && err == nil {
				units[o.obj] = UnitName(uint32(u))
			}
		}
	}
	a.sess, a.units = s, units
	a.rpmRefused, a.noReliability = s.rpmRefused, s.noReliability
	a.statsMu.Lock()
	a.stats.local = c.LocalAddr().String()
	a.stats.deviceMaxAPDU = deviceMax
	a.stats.maxAPDU = s.maxAPDU
	a.stats.rpmRefused = s.rpmRefused
	a.stats.requests += uint64(s.rpm + s.rp)
	a.statsMu.Unlock()
	return nil
}

// resolve turns host and port into a UDP address; a name that does not
// resolve is a *net.DNSError, which Classify calls HOST_NOT_FOUND.
func resolve(ctx context.Context, host string, port int) (netip.AddrPort, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		if !ip.Unmap().Is4() {
			return netip.AddrPort{}, fmt.Errorf("%s is not an IPv4 address; BACnet/IP runs on IPv4", host)
		}
		return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("resolve %s: %w", host, err)
	}
	return netip.AddrPortFrom(ips[0].Unmap(), uint16(port)), nil
}

// onIAm keeps the configured device's I-Am for diagnostics.
func (a *Adapter) onIAm(from netip.AddrPort, iam wire.IAm) {
	if iam.Device.Instance != uint32(a.cfg.DeviceInstance) {
		return
	}
	a.statsMu.Lock()
	a.stats.iam = &IAmInfo{
		Address: from.String(), MaxAPDU: iam.MaxAPDU, Segmentation: iam.Segmentation.String(),
		VendorID: iam.VendorID, ReceivedAt: time.Now().UTC(),
	}
	a.statsMu.Unlock()
}

// Close closes the socket; it is safe to call more than once.
func (a *Adapter) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closeLocked()
}

func (a *Adapter) closeLocked() error {
	a.statsMu.Lock()
	a.stats.connected = false
	a.statsMu.Unlock()
	if a.c == nil {
		return nil
	}
	err := a.c.Close()
	a.c, a.sess = nil, nil
	if err != nil {
		return fmt.Errorf("bacnet: close: %w", err)
	}
	return nil
}

var errNotConnected = errors.New("bacnet: not connected")

// Poll reads every data point once. A property the device refuses only
// spoils its own point; a device that stops answering spoils all of them
// and the error is returned so that the runner reconnects.
func (a *Adapter) Poll(ctx context.Context) ([]adapters.Reading, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	begin := time.Now()
	readings := make([]adapters.Reading, len(a.points))
	fatal := func(err error, rpm, rp int) ([]adapters.Reading, error) {
		at := time.Now()
		for i := range a.points {
			readings[i] = adapters.BadReading(a.name, a.id, a.points[i].dp, at, err)
		}
		if !errors.Is(err, errNotConnected) {
			a.recordError(err, at)
		}
		a.recordPoll(begin, rpm, rp, nil)
		return readings, err
	}
	if a.c == nil {
		if a.connErr != nil {
			return fatal(fmt.Errorf("%w: %w", errNotConnected, a.connErr), 0, 0)
		}
		return fatal(adapters.WithCode(adapters.CodeDeviceOffline, errNotConnected), 0, 0)
	}
	s := a.sess
	s.rpm, s.rp = 0, 0
	res, err := s.read(ctx, a.objs)
	a.rpmRefused, a.noReliability = s.rpmRefused, s.noReliability
	if err != nil {
		return fatal(fmt.Errorf("bacnet: poll %s: %w", a.cfg.Address(), err), s.rpm, s.rp)
	}
	at := time.Now()
	faults := map[string]string{}
	var lastErr error
	for i, p := range a.points {
		readings[i] = a.reading(p, res, at)
		if r := readings[i]; r.Quality == adapters.Bad {
			faults[p.dp.Name] = r.QualityCode
			if lastErr == nil {
				lastErr = a.pointError(p, res)
			}
		}
	}
	if lastErr != nil {
		a.recordError(lastErr, at)
	}
	a.recordPoll(begin, s.rpm, s.rp, faults)
	return readings, nil
}

// pointError is why p is BAD in res, for the diagnostics' last error.
func (a *Adapter) pointError(p point, res map[propKey]propResult) error {
	if _, err := a.value(p, res); err != nil {
		return fmt.Errorf("%s (%s): %w", p.dp.Name, p.reg, err)
	}
	return fmt.Errorf("%s (%s): %w", p.dp.Name, p.reg, statusError(p, res))
}

func (a *Adapter) reading(p point, res map[propKey]propResult, at time.Time) adapters.Reading {
	v, err := a.value(p, res)
	if err == nil {
		err = statusError(p, res)
	}
	if err != nil {
		return adapters.BadReading(a.name, a.id, p.dp, at, err)
	}
	unit := p.dp.Unit
	if unit == "" && p.kind == analog && p.isPresentValue() {
		unit = a.units[p.reg.Object]
	}
	return adapters.Reading{
		DeviceName: a.name, DeviceID: a.id, Metric: p.dp.Name, Value: v, Unit: unit,
		Timestamp: at, Quality: adapters.Good,
	}
}

// value converts p's property to its reading value: analog present-value
// to float64 (scaled), binary to bool, multi-state to uint64; any other
// property to its natural Go value (a list for several values).
func (a *Adapter) value(p point, res map[propKey]propResult) (any, error) {
	r := res[propKey{p.reg.Object, p.reg.Property}]
	if r.err != nil {
		var qe *adapters.QualityError
		if errors.As(r.err, &qe) {
			return nil, r.err
		}
		return nil, adapters.WithCode(adapters.CodeReadError, r.err)
	}
	if !p.isPresentValue() {
		if len(r.vals) == 1 {
			return plain(r.vals[0]), nil
		}
		out := make([]any, len(r.vals))
		for i, v := range r.vals {
			out[i] = plain(v)
		}
		return out, nil
	}
	v, err := r.one()
	if err != nil {
		return nil, err
	}
	bad := func() (any, error) {
		return nil, adapters.WithCode(adapters.CodeBadData, fmt.Errorf("present-value of %s is a %T", p.reg.Object, v))
	}
	switch p.kind {
	case analog:
		var f float64
		switch x := v.(type) {
		case float32:
			f = float64(x)
		case float64:
			f = x
		case uint64:
			f = float64(x)
		case int64:
			f = float64(x)
		default:
			return bad()
		}
		if p.scale != 1 {
			f *= p.scale
		}
		return f, nil
	case binary:
		switch x := v.(type) {
		case wire.Enumerated:
			return x != 0, nil
		case bool:
			return x, nil
		}
		return bad()
	case multiState:
		if x, ok := v.(uint64); ok {
			return x, nil
		}
		return bad()
	}
	return plain(v), nil
}

// plain turns a decoded value into what a reading carries.
func plain(v any) any {
	switch x := v.(type) {
	case float32:
		return float64(x)
	case wire.Enumerated:
		return uint64(x)
	case wire.ObjectID:
		return x.String()
	case wire.BitString:
		bits := make([]bool, x.Len)
		for i := range bits {
			bits[i] = x.Bit(i)
		}
		return bits
	case wire.Date, wire.Time, wire.ContextValue:
		return fmt.Sprintf("%x", x)
	}
	return v
}

// Status flag bits (clause 12.x, BACnetStatusFlags) and reliability names.
const (
	flagFault        = 1
	flagOutOfService = 3
)

var reliabilityNames = []string{
	"no-fault-detected", "no-sensor", "over-range", "under-range", "open-loop", "shorted-loop",
	"no-output", "unreliable-other", "process-error", "multi-state-fault", "configuration-error",
	"", "communication-failure", "member-fault", "monitored-object-fault", "tripped",
	"lamp-failure", "activation-failure", "renew-dhcp-failure", "renew-fd-registration-failure",
	"restart-auto-negotiation-failure", "restart-failure", "proprietary-command-failure",
	"faults-listed", "referenced-object-fault",
}

// statusError says why a present-value the device reported is not to be
// trusted: a fault or out-of-service status flag, or a reliability other
// than no-fault-detected. Status properties that could not be read do
// not spoil the value.
func statusError(p point, res map[propKey]propResult) error {
	if !p.isPresentValue() {
		return nil
	}
	rel, _ := res[propKey{p.reg.Object, wire.PropReliability}].one()
	if r, ok := rel.(wire.Enumerated); ok && r != 0 {
		name := strconv.FormatUint(uint64(r), 10)
		if int(r) < len(reliabilityNames) && reliabilityNames[r] != "" {
			name = reliabilityNames[r]
		}
		return adapters.WithCode(adapters.CodeDeviceFault, fmt.Errorf("%s reliability is %s", p.reg.Object, name))
	}
	sf, _ := res[propKey{p.reg.Object, wire.PropStatusFlags}].one()
	if bits, ok := sf.(wire.BitString); ok {
		switch {
		case bits.Bit(flagFault):
			return adapters.WithCode(adapters.CodeDeviceFault, fmt.Errorf("%s status-flags has fault set", p.reg.Object))
		case bits.Bit(flagOutOfService):
			return adapters.WithCode(adapters.CodeOutOfService, fmt.Errorf("%s is out of service", p.reg.Object))
		}
	}
	return nil
}

// Interface guards.
var (
	_ adapters.Driver    = Driver{}
	_ adapters.Adapter   = (*Adapter)(nil)
	_ adapters.Writer    = (*Adapter)(nil)
	_ adapters.Diagnoser = (*Adapter)(nil)
)
