// Package modbus is the agent's Modbus TCP and RTU adapter.
//
// Its point is to keep the number of requests per poll small: data points
// are grouped by unit and area and merged into contiguous blocks once, when
// the adapter is built, and each poll reads every block with a single
// request and decodes the points out of it. On a serial line or behind a
// gateway the round trip, not the payload, is what costs.
//
// The wire protocol is github.com/goburrow/modbus. The adapter only adds
// the planning, the decoding, error classification into quality codes,
// writes and diagnostics. See README.md for the configuration reference.
package modbus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/goburrow/modbus"
	"github.com/goburrow/serial"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Protocol is the endpoint "protocol" value of this adapter.
const Protocol = "modbus"

// Driver builds Modbus adapters. The zero value is ready to use.
type Driver struct{}

// Protocol returns "modbus".
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
	if err != nil {
		errs = append(errs, err)
	}
	// Data points are only checked against a usable connection; otherwise
	// a bad maxCount would also flag every data point.
	var points []point
	if err == nil {
		points, err = resolvePoints(ep.DataPoints, cfg)
		errs = append(errs, err)
	}
	return cfg, points, errors.Join(errs...)
}

// Adapter polls and writes one Modbus endpoint. Poll, Write, Connect and
// Close are serialised by a mutex, because the API's write route runs on a
// goroutine of its own next to the runner's polls; Diagnostics only takes
// the statistics lock and so never waits for a slow device.
type Adapter struct {
	name, id string
	cfg      Config
	points   []point
	byName   map[string]int
	blocks   []block
	log      *slog.Logger
	dial     func(Config) transport

	mu   sync.Mutex // serialises requests; guards conn and connErr
	conn transport
	// connErr is why the last Connect failed; a Poll without a connection
	// reports it, so its BAD readings say CONNECTION_REFUSED rather than a
	// vague "not connected".
	connErr error

	statsMu sync.Mutex
	stats   stats
}

// NewAdapter validates ep and builds its adapter with the block plan.
func NewAdapter(ep adapters.Endpoint, env adapters.Env) (*Adapter, error) {
	cfg, points, err := compile(ep)
	if err != nil {
		return nil, fmt.Errorf("modbus endpoint %q: %w", ep.Name, err)
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &Adapter{
		name: ep.Name, id: ep.UUID, cfg: cfg, points: points,
		byName: make(map[string]int, len(points)),
		blocks: planBlocks(points, cfg.MaxGap, cfg.MaxCount, cfg.MaxBitCount),
		log:    log.With("protocol", Protocol, "endpoint", ep.Name),
		dial:   dialGoburrow,
	}
	for i, p := range points {
		a.byName[p.dp.Name] = i
	}
	return a, nil
}

// Config returns the decoded connection settings with defaults applied.
func (a *Adapter) Config() Config { return a.cfg }

// Connect opens the TCP connection or the serial port. goburrow would
// otherwise dial lazily on the first request, which would hide a refused
// connection from the runner until the first poll.
func (a *Adapter) Connect(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closeLocked()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("modbus: connect %s: %w", a.cfg.Address(), err)
	}
	t := a.dial(a.cfg)
	t.setTimeout(requestTimeout(ctx, a.cfg.Timeout()))
	if err := t.Connect(); err != nil {
		_ = t.Close()
		err = fmt.Errorf("modbus: connect %s %s: %w", a.cfg.Transport, a.cfg.Address(), err)
		a.recordError(err, time.Now())
		a.connErr = err
		return err
	}
	a.conn, a.connErr = t, nil
	a.statsMu.Lock()
	a.stats.connected = true
	a.statsMu.Unlock()
	return nil
}

// Close closes the connection; it is safe to call more than once.
func (a *Adapter) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closeLocked()
}

func (a *Adapter) closeLocked() error {
	a.statsMu.Lock()
	a.stats.connected = false
	a.statsMu.Unlock()
	if a.conn == nil {
		return nil
	}
	err := a.conn.Close()
	a.conn = nil
	if err != nil {
		return fmt.Errorf("modbus: close %s: %w", a.cfg.Address(), err)
	}
	return nil
}

var errNotConnected = errors.New("modbus: not connected")

// Poll reads every block once. An exception or an undecodable answer only
// spoils the points of its block; a transport error spoils all of them and
// is returned so that the runner reconnects.
func (a *Adapter) Poll(ctx context.Context) ([]adapters.Reading, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	begin := time.Now()
	readings := make([]adapters.Reading, len(a.points))
	requests := 0
	fatal := func(err error) ([]adapters.Reading, error) {
		at := time.Now()
		for i := range a.points {
			readings[i] = adapters.BadReading(a.name, a.id, a.points[i].dp, at, err)
		}
		// A missing connection is the runner's business, not a new error.
		if !errors.Is(err, errNotConnected) {
			a.recordError(err, at)
		}
		a.recordPoll(begin, requests)
		return readings, err
	}
	if a.conn == nil {
		if a.connErr != nil {
			return fatal(fmt.Errorf("%w: %w", errNotConnected, a.connErr))
		}
		return fatal(adapters.WithCode(adapters.CodeDeviceOffline, errNotConnected))
	}
	for _, b := range a.blocks {
		if err := ctx.Err(); err != nil {
			return fatal(fmt.Errorf("modbus: poll %s: %w", a.cfg.Address(), err))
		}
		a.conn.setUnit(b.unit)
		a.conn.setTimeout(requestTimeout(ctx, a.cfg.Timeout()))
		data, err := readBlock(a.conn, b)
		requests++
		at := time.Now()
		if err == nil && len(data) < wantBytes(b) {
			err = adapters.WithCode(adapters.CodeBadData,
				fmt.Errorf("short response: %d bytes for %d %s values", len(data), b.count, b.area))
		}
		if err != nil {
			err = fmt.Errorf("modbus: read %s %d..%d of unit %d: %w", b.area, b.start, int(b.start)+int(b.count)-1, b.unit, err)
			qerr, transportErr := classifyRequestError(err)
			if transportErr {
				return fatal(qerr)
			}
			a.resyncIfNeeded(qerr)
			a.log.Debug("block read failed", "area", b.area.String(), "start", b.start, "unit", b.unit, "err", qerr)
			a.recordError(qerr, at)
			for _, i := range b.points {
				readings[i] = adapters.BadReading(a.name, a.id, a.points[i].dp, at, qerr)
			}
			continue
		}
		for _, i := range b.points {
			readings[i] = a.decodePoint(i, b, data, at)
		}
	}
	a.recordPoll(begin, requests)
	return readings, nil
}

func (a *Adapter) decodePoint(i int, b block, data []byte, at time.Time) adapters.Reading {
	p := a.points[i]
	off := int(p.reg.Index) - int(b.start)
	var v any
	var err error
	if b.area.IsBit() {
		v, err = bitAt(data, off)
	} else {
		v, err = decodeRegisters(data[2*off:2*(off+p.typ.Words())], p.typ, p.layout)
		v = applyScale(v, p.scale)
	}
	if err != nil {
		return adapters.BadReading(a.name, a.id, p.dp, at, adapters.WithCode(adapters.CodeBadData, err))
	}
	return adapters.Reading{
		DeviceName: a.name, DeviceID: a.id, Metric: p.dp.Name, Value: v, Unit: p.dp.Unit,
		Timestamp: at, Quality: adapters.Good,
	}
}

// resyncIfNeeded drops the connection after an answer that did not match
// its request. On TCP that is usually a late answer to a request that
// timed out; every later answer would then be one behind. goburrow dials
// again by itself on the next request.
func (a *Adapter) resyncIfNeeded(err error) {
	var me *modbus.ModbusError
	if errors.As(err, &me) || adapters.Classify(err) != adapters.CodeBadData {
		return
	}
	if cerr := a.conn.Close(); cerr != nil {
		a.log.Debug("close after bad answer", "err", cerr)
	}
}

func wantBytes(b block) int {
	if b.area.IsBit() {
		return (int(b.count) + 7) / 8
	}
	return 2 * int(b.count)
}

func readBlock(c transport, b block) ([]byte, error) {
	switch b.area {
	case Holding:
		return c.ReadHoldingRegisters(b.start, b.count)
	case Input:
		return c.ReadInputRegisters(b.start, b.count)
	case Coil:
		return c.ReadCoils(b.start, b.count)
	case Discrete:
		return c.ReadDiscreteInputs(b.start, b.count)
	}
	return nil, fmt.Errorf("unknown area %d", b.area)
}

// exceptionSlaveBusy is Modbus exception 6, "slave device busy".
const exceptionSlaveBusy = 6

// classifyRequestError sorts the error of one request into what it means
// for the poll. A Modbus exception is the device answering, so the
// connection is fine; so is a reply goburrow could not make sense of. A
// transport error means the connection is gone.
func classifyRequestError(err error) (qerr error, transportErr bool) {
	var me *modbus.ModbusError
	var qe *adapters.QualityError
	switch {
	case errors.As(err, &qe):
		return err, false
	case errors.As(err, &me):
		if me.ExceptionCode == exceptionSlaveBusy {
			return adapters.WithCode(adapters.CodeDeviceBusy, err), false
		}
		return adapters.WithCode(adapters.CodeReadError, err), false
	case errors.Is(err, serial.ErrTimeout):
		// goburrow/serial's time-out is a plain error Classify cannot know.
		return adapters.WithCode(adapters.CodeTimeout, err), true
	case isTransportError(err):
		return err, true
	}
	// What is left are goburrow's checks of the reply (length, transaction
	// id, byte count), which are plain fmt errors.
	return adapters.WithCode(adapters.CodeBadData, err), false
}

func isTransportError(err error) bool {
	var ne net.Error
	var pe *os.PathError
	var errno syscall.Errno
	return errors.As(err, &ne) || errors.As(err, &pe) || errors.As(err, &errno) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded)
}

// requestTimeout is the configured per-request time-out, shortened so that
// a request never outlives ctx; goburrow takes no context.
func requestTimeout(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < d {
			return max(left, time.Millisecond)
		}
	}
	return d
}

func joinHostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// Interface guards.
var (
	_ adapters.Driver    = Driver{}
	_ adapters.Adapter   = (*Adapter)(nil)
	_ adapters.Writer    = (*Adapter)(nil)
	_ adapters.Diagnoser = (*Adapter)(nil)
)
