package bacnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet/wire"
)

// WhoIs defaults; see README.md, section Discovery.
const (
	DefaultWhoIsWindow       = 3 * time.Second
	DefaultRequestsPerSecond = 20
	DefaultMaxDevices        = 100
	DefaultMaxObjects        = 1000
)

// WhoIsOptions says where to look for devices and how hard to read them.
// The zero value broadcasts a Who-Is for every instance on the local
// network and reads every answering device's objects.
type WhoIsOptions struct {
	// Target, "host" or "host:port", sends the Who-Is to one address
	// instead of broadcasting it.
	Target string
	// BroadcastAddress is where a broadcast goes, "host:port"; default
	// 255.255.255.255:47808. A subnet's directed broadcast address
	// (192.168.1.255:47808) is often what a router lets through.
	BroadcastAddress string
	// BBMD, when set, registers as a foreign device first and broadcasts
	// through the BBMD (Distribute-Broadcast-To-Network), for devices on
	// another IP subnet.
	BBMD *BBMD
	// Low and High limit the device instances asked for; both zero (the
	// default) asks every device.
	Low, High int
	// LocalPort is the UDP port to send from and listen on; 0 picks a
	// free one. Devices that broadcast their I-Am to port 47808 are only
	// heard with 47808 here.
	LocalPort int
	// Window is how long I-Ams are collected; default 3 s.
	Window time.Duration
	// Timeout bounds each confirmed request; default 3 s.
	Timeout time.Duration
	// RequestsPerSecond paces the reads of the found devices' objects, so
	// discovery never floods a slow MS/TP trunk behind a router; default
	// 20, across all devices.
	RequestsPerSecond float64
	// MaxDevices caps the devices kept (default 100), MaxObjects the
	// objects read per device (default 1000).
	MaxDevices, MaxObjects int
	// SkipObjects only collects the I-Ams.
	SkipObjects bool
	Logger      *slog.Logger
}

// DiscoveredDevice is one device that answered, with its objects.
type DiscoveredDevice struct {
	Instance     uint32 `json:"deviceInstance"`
	Address      string `json:"address"`
	MaxAPDU      uint32 `json:"maxApdu"`
	Segmentation string `json:"segmentation"`
	VendorID     uint32 `json:"vendorId"`
	// Name is the device object's object-name.
	Name    string             `json:"name,omitempty"`
	Objects []DiscoveredObject `json:"objects,omitempty"`
	// Truncated is set when the device has more than MaxObjects objects.
	Truncated bool `json:"truncated,omitempty"`
	// Error says why the objects could not be read (in full).
	Error string `json:"error,omitempty"`
}

// DiscoveredObject is one object of a device; Register is its data point
// address when the adapter can read it.
type DiscoveredObject struct {
	Type     string `json:"type"`
	Instance uint32 `json:"instance"`
	Name     string `json:"name,omitempty"`
	Register string `json:"register,omitempty"`
}

// WhoIs finds BACnet devices: it sends a Who-Is (to opts.Target, through
// the BBMD, or as a local broadcast), collects I-Am answers for
// opts.Window, then reads each device's object-list and the object-name of
// every object, paced to opts.RequestsPerSecond. A device whose objects
// cannot be read is still returned, with Error set. The error is for
// what stops discovery as a whole: a bad option, a socket that cannot be
// opened, a BBMD that refuses, ctx ending.
func WhoIs(ctx context.Context, opts WhoIsOptions) ([]DiscoveredDevice, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var dst netip.AddrPort // zero: broadcast
	if opts.Target != "" {
		if dst, err = resolveHostPort(ctx, opts.Target); err != nil {
			return nil, fmt.Errorf("bacnet: who-is target: %w", err)
		}
	}
	found := &iamCollector{max: opts.MaxDevices, byInstance: map[uint32]DiscoveredDevice{}}
	var bad atomic.Uint64
	c, err := listen(opts.LocalPort, defaultMaxAPDU, opts.Logger, found.add, &bad)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if b := opts.BBMD; b != nil {
		bbmd, err := resolve(ctx, b.Host, b.Port)
		if err != nil {
			return nil, fmt.Errorf("bacnet: bbmd %s: %w", b.Host, err)
		}
		if err := c.register(ctx, bbmd, time.Duration(b.TTLSeconds)*time.Second, opts.Timeout); err != nil {
			return nil, err
		}
	} else if !dst.IsValid() && opts.BroadcastAddress != "" {
		if dst, err = resolveHostPort(ctx, opts.BroadcastAddress); err != nil {
			return nil, fmt.Errorf("bacnet: broadcast address: %w", err)
		}
		c.broadcastTo(dst)
		dst = netip.AddrPort{}
	}
	low, high := opts.Low, opts.High
	if low == 0 && high == 0 {
		low, high = -1, -1
	}
	if err := c.whoIs(dst, low, high); err != nil {
		return nil, err
	}
	select {
	case <-time.After(opts.Window):
	case <-ctx.Done():
		return nil, fmt.Errorf("bacnet: who-is: %w", ctx.Err())
	}
	devices := found.stop()
	if opts.SkipObjects {
		return devices, nil
	}
	lim := newLimiter(opts.RequestsPerSecond)
	for i := range devices {
		if err := readDevice(ctx, c, &devices[i], opts, lim); err != nil {
			if ctx.Err() != nil {
				return devices, fmt.Errorf("bacnet: who-is: %w", ctx.Err())
			}
			devices[i].Error = err.Error()
			opts.Logger.Debug("read device objects", "device", devices[i].Instance, "err", err)
		}
	}
	return devices, nil
}

func (o WhoIsOptions) withDefaults() (WhoIsOptions, error) {
	if o.Window <= 0 {
		o.Window = DefaultWhoIsWindow
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeoutMS * time.Millisecond
	}
	if o.RequestsPerSecond <= 0 {
		o.RequestsPerSecond = DefaultRequestsPerSecond
	}
	if o.MaxDevices <= 0 {
		o.MaxDevices = DefaultMaxDevices
	}
	if o.MaxObjects <= 0 {
		o.MaxObjects = DefaultMaxObjects
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Low < 0 || o.High < o.Low || o.High >= wire.MaxInstance {
		return o, fmt.Errorf("bacnet: who-is instance range %d..%d: want 0 <= low <= high < %d", o.Low, o.High, wire.MaxInstance)
	}
	if o.LocalPort < 0 || o.LocalPort > 65535 {
		return o, fmt.Errorf("bacnet: who-is local port %d out of range", o.LocalPort)
	}
	if b := o.BBMD; b != nil {
		c := *b
		if c.Port == 0 {
			c.Port = DefaultPort
		}
		if c.TTLSeconds == 0 {
			c.TTLSeconds = defaultTTLSeconds
		}
		o.BBMD = &c
	}
	return o, nil
}

// resolveHostPort resolves "host" or "host:port" (default 47808).
func resolveHostPort(ctx context.Context, s string) (netip.AddrPort, error) {
	host, port := s, DefaultPort
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return netip.AddrPort{}, fmt.Errorf("%q: bad port", s)
		}
		host, port = h, n
	}
	return resolve(ctx, host, port)
}

// iamCollector keeps the first I-Am of each device until stopped.
type iamCollector struct {
	mu         sync.Mutex
	max        int
	stopped    bool
	byInstance map[uint32]DiscoveredDevice
}

func (f *iamCollector) add(from netip.AddrPort, iam wire.IAm) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, seen := f.byInstance[iam.Device.Instance]; f.stopped || seen || len(f.byInstance) >= f.max {
		return
	}
	f.byInstance[iam.Device.Instance] = DiscoveredDevice{
		Instance: iam.Device.Instance, Address: from.String(), MaxAPDU: iam.MaxAPDU,
		Segmentation: iam.Segmentation.String(), VendorID: iam.VendorID,
	}
}

// stop ends the collection and returns the devices by instance.
func (f *iamCollector) stop() []DiscoveredDevice {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	out := make([]DiscoveredDevice, 0, len(f.byInstance))
	for _, d := range f.byInstance {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b DiscoveredDevice) int { return int(a.Instance) - int(b.Instance) })
	return out
}

// readDevice fills in d's name and objects.
func readDevice(ctx context.Context, c *client, d *DiscoveredDevice, opts WhoIsOptions, lim *limiter) error {
	peer, err := netip.ParseAddrPort(d.Address)
	if err != nil {
		return err
	}
	s := &session{c: c, peer: peer, timeout: opts.Timeout, maxAPDU: int(min(max(d.MaxAPDU, minMaxAPDU), defaultMaxAPDU)), useRPM: true, limit: lim}
	dev := wire.ObjectID{Type: wire.Device, Instance: d.Instance}
	ids, truncated, err := objectList(ctx, s, dev, opts.MaxObjects)
	if err != nil {
		return fmt.Errorf("read object-list: %w", err)
	}
	d.Truncated = truncated
	reads := make([]objectRead, len(ids))
	for i, id := range ids {
		reads[i] = objectRead{obj: id, props: []wire.PropertyID{wire.PropObjectName}}
	}
	res, err := s.read(ctx, reads)
	if err != nil {
		return fmt.Errorf("read object names: %w", err)
	}
	for _, id := range ids {
		v, _ := res[propKey{id, wire.PropObjectName}].one()
		name, _ := v.(string)
		if id == dev {
			d.Name = name
			continue
		}
		o := DiscoveredObject{Type: id.Type.String(), Instance: id.Instance, Name: name}
		if kindOf(id.Type) != 0 {
			o.Register = id.String()
		}
		d.Objects = append(d.Objects, o)
	}
	return nil
}

// objectList reads a device's object-list whole, or element by element
// when the whole list does not fit an unsegmented answer.
func objectList(ctx context.Context, s *session, dev wire.ObjectID, maxObjects int) ([]wire.ObjectID, bool, error) {
	vals, err := s.readProperty(ctx, dev, wire.PropertyRef{ID: wire.PropObjectList, Index: wire.ArrayAll})
	if err == nil {
		ids, err := objectIDs(vals)
		if len(ids) > maxObjects {
			return ids[:maxObjects], true, err
		}
		return ids, false, err
	}
	var abort *wire.AbortError
	if !errors.Is(err, wire.ErrSegmented) && !errors.As(err, &abort) {
		return nil, false, err
	}
	vals, err = s.readProperty(ctx, dev, wire.PropertyRef{ID: wire.PropObjectList, Index: 0})
	if err != nil {
		return nil, false, err
	}
	n, ok := singleUnsigned(vals)
	if !ok {
		return nil, false, fmt.Errorf("object-list length %v", vals)
	}
	truncated := n > uint64(maxObjects)
	n = min(n, uint64(maxObjects))
	ids := make([]wire.ObjectID, 0, n)
	for i := uint64(1); i <= n; i++ {
		vals, err := s.readProperty(ctx, dev, wire.PropertyRef{ID: wire.PropObjectList, Index: uint32(i)})
		if err != nil {
			return ids, truncated, err
		}
		id, err := objectIDs(vals)
		if err != nil || len(id) != 1 {
			return ids, truncated, fmt.Errorf("object-list[%d]: %v", i, vals)
		}
		ids = append(ids, id[0])
	}
	return ids, truncated, nil
}

func objectIDs(vals []any) ([]wire.ObjectID, error) {
	ids := make([]wire.ObjectID, 0, len(vals))
	for _, v := range vals {
		id, ok := v.(wire.ObjectID)
		if !ok {
			return ids, fmt.Errorf("object-list holds a %T", v)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func singleUnsigned(vals []any) (uint64, bool) {
	if len(vals) != 1 {
		return 0, false
	}
	n, ok := vals[0].(uint64)
	return n, ok
}

// limiter spaces requests at least every apart; a nil limiter lets all
// through at once.
type limiter struct {
	every time.Duration
	mu    sync.Mutex
	next  time.Time
}

func newLimiter(perSecond float64) *limiter {
	return &limiter{every: time.Duration(float64(time.Second) / perSecond)}
}

// reserve returns how long a request at now must wait and books its slot.
func (l *limiter) reserve(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next.Before(now) {
		l.next = now
	}
	wait := l.next.Sub(now)
	l.next = l.next.Add(l.every)
	return wait
}

func (l *limiter) wait(ctx context.Context) error {
	if l == nil {
		return nil
	}
	if !lifecycle.Sleep(ctx, l.reserve(time.Now())) {
		return ctx.Err()
	}
	return nil
}
