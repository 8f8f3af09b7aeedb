package bacnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet/wire"
)

// client is one UDP socket speaking BACnet/IP: it sends confirmed requests
// and matches their answers by invoke id and sender, hands every I-Am to
// onIAm, and keeps a foreign-device registration alive. One goroutine
// reads the socket; Close ends it and the re-registration goroutine.
type client struct {
	conn    *net.UDPConn
	log     *slog.Logger
	maxAPDU int

	mu      sync.Mutex
	pending map[uint8]*call
	next    uint8
	onIAm   func(from netip.AddrPort, iam wire.IAm)
	bbmd    netip.AddrPort // valid while registered as a foreign device
	// broadcast is where a broadcast Who-Is goes without a BBMD.
	broadcast netip.AddrPort

	results chan bvlcResult // BVLC-Results, for the registration in progress
	// badFrames counts datagrams that did not decode.
	badFrames *atomic.Uint64

	done chan struct{}
	wg   sync.WaitGroup
}

type call struct {
	peer netip.AddrPort
	ch   chan wire.APDU
}

type bvlcResult struct {
	from netip.AddrPort
	code uint16
}

// errClosed is what a request in flight gets when the client closes.
var errClosed = fmt.Errorf("bacnet: client closed: %w", net.ErrClosed)

// listen opens the UDP socket on localPort (0: any free port) of every
// IPv4 interface and starts reading it.
func listen(localPort, maxAPDU int, log *slog.Logger, onIAm func(netip.AddrPort, wire.IAm), badFrames *atomic.Uint64) (*client, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{Port: localPort})
	if err != nil {
		return nil, fmt.Errorf("bacnet: listen on udp port %d: %w", localPort, err)
	}
	c := &client{
		conn: conn, log: log, maxAPDU: maxAPDU, pending: make(map[uint8]*call), onIAm: onIAm,
		results: make(chan bvlcResult, 1), done: make(chan struct{}), badFrames: badFrames,
	}
	c.wg.Add(1)
	go c.readLoop()
	return c, nil
}

// LocalAddr is the socket's address.
func (c *client) LocalAddr() netip.AddrPort { return c.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close closes the socket, fails the requests in flight and waits for the
// client's goroutines.
func (c *client) Close() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	close(c.done)
	err := c.conn.Close()
	c.wg.Wait()
	c.mu.Lock()
	for id, cl := range c.pending {
		close(cl.ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
	return err
}

func (c *client) readLoop() {
	defer c.wg.Done()
	buf := make([]byte, wire.MaxFrame+64)
	for {
		n, from, err := c.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			c.log.Debug("udp read", "err", err)
			select {
			case <-c.done:
				return
			case <-time.After(10 * time.Millisecond): // no busy loop on a persistent error
			}
			continue
		}
		frame := append([]byte(nil), buf[:n]...) // decoded values point into it
		c.dispatch(unmap(from), frame)
	}
}

func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }

func (c *client) dispatch(from netip.AddrPort, frame []byte) {
	m, err := wire.Decode(frame)
	if err != nil {
		c.badFrames.Add(1)
		c.log.Debug("undecodable datagram", "from", from, "err", err)
		return
	}
	if m.BVLC.Function == wire.BVLCResult {
		select {
		case c.results <- bvlcResult{from: from, code: m.BVLC.Result}:
		default:
		}
		return
	}
	if !m.HasAPDU {
		return
	}
	origin := from
	if m.BVLC.Function == wire.BVLCForwardedNPDU {
		origin = m.BVLC.Origin
	}
	a := m.APDU
	switch a.Type {
	case wire.PDUUnconfirmedRequest:
		if a.Service != wire.ServiceIAm {
			return
		}
		iam, err := wire.DecodeIAm(a.Payload)
		if err != nil {
			c.log.Debug("bad I-Am", "from", origin, "err", err)
			return
		}
		c.mu.Lock()
		f := c.onIAm
		c.mu.Unlock()
		if f != nil {
			f(origin, iam)
		}
	case wire.PDUSimpleAck, wire.PDUComplexAck, wire.PDUError, wire.PDUReject, wire.PDUAbort, wire.PDUSegmentAck:
		c.mu.Lock()
		cl, ok := c.pending[a.InvokeID]
		// An answer from anyone but the peer asked, or for an invoke id
		// no longer waited for (a late answer after a time-out), is
		// dropped rather than taken for another request's.
		if ok && cl.peer == origin {
			delete(c.pending, a.InvokeID)
			cl.ch <- a
		}
		c.mu.Unlock()
	}
}

// request sends a confirmed request to peer and waits for its answer, at
// most timeout and never past ctx. An Error, Reject or Abort answer, or a
// segmented one, is returned as the error; a time-out wraps
// os.ErrDeadlineExceeded so adapters.Classify calls it TIMEOUT.
func (c *client) request(ctx context.Context, peer netip.AddrPort, service uint8, payload []byte, timeout time.Duration) (wire.APDU, error) {
	apdu := wire.AppendConfirmedRequest(nil, 0, service, c.maxAPDU, payload)
	if len(apdu) > c.maxAPDU {
		return wire.APDU{}, fmt.Errorf("bacnet: request of %d bytes exceeds the max APDU of %d", len(apdu), c.maxAPDU)
	}
	cl := &call{peer: peer, ch: make(chan wire.APDU, 1)}
	c.mu.Lock()
	id, ok := c.allocLocked(cl)
	c.mu.Unlock()
	if !ok {
		return wire.APDU{}, errors.New("bacnet: 256 requests in flight")
	}
	apdu[2] = id
	frame := wire.AppendBVLC(nil, wire.BVLCOriginalUnicastNPDU, wire.AppendNPDU(nil, true, apdu))
	if _, err := c.conn.WriteToUDPAddrPort(frame, peer); err != nil {
		c.forget(id, cl)
		return wire.APDU{}, fmt.Errorf("bacnet: send to %s: %w", peer, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a, ok := <-cl.ch:
		if !ok {
			return wire.APDU{}, errClosed
		}
		if err := a.AnswerError(); err != nil {
			return a, err
		}
		if a.Service != service {
			return a, adapters.WithCode(adapters.CodeBadData, fmt.Errorf("bacnet: answer for service %d to a request for %d", a.Service, service))
		}
		return a, nil
	case <-timer.C:
		c.forget(id, cl)
		return wire.APDU{}, fmt.Errorf("bacnet: no answer from %s within %s: %w", peer, timeout, os.ErrDeadlineExceeded)
	case <-ctx.Done():
		c.forget(id, cl)
		return wire.APDU{}, fmt.Errorf("bacnet: request to %s: %w", peer, ctx.Err())
	case <-c.done:
		return wire.APDU{}, errClosed
	}
}

// allocLocked picks the next free invoke id for cl.
func (c *client) allocLocked(cl *call) (uint8, bool) {
	for range 256 {
		id := c.next
		c.next++
		if _, busy := c.pending[id]; !busy {
			c.pending[id] = cl
			return id, true
		}
	}
	return 0, false
}

func (c *client) forget(id uint8, cl *call) {
	c.mu.Lock()
	if c.pending[id] == cl {
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// whoIs sends a Who-Is for instances low..high (low < 0: every device) to
// dst; a zero dst broadcasts: through the BBMD when registered as a
// foreign device, else to the local broadcast address.
func (c *client) whoIs(dst netip.AddrPort, low, high int) error {
	npdu := wire.AppendNPDU(nil, false, wire.AppendUnconfirmedRequest(nil, wire.ServiceWhoIs, wire.AppendWhoIs(nil, low, high)))
	fn := uint8(wire.BVLCOriginalUnicastNPDU)
	if !dst.IsValid() {
		c.mu.Lock()
		bbmd, bcast := c.bbmd, c.broadcast
		c.mu.Unlock()
		switch {
		case bbmd.IsValid():
			fn, dst = wire.BVLCDistributeBroadcastToNetwork, bbmd
		case bcast.IsValid():
			fn, dst = wire.BVLCOriginalBroadcastNPDU, bcast
		default:
			fn, dst = wire.BVLCOriginalBroadcastNPDU, netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), DefaultPort)
		}
	}
	if _, err := c.conn.WriteToUDPAddrPort(wire.AppendBVLC(nil, fn, npdu), dst); err != nil {
		return fmt.Errorf("bacnet: send who-is to %s: %w", dst, err)
	}
	return nil
}

// broadcastTo sets where broadcasts go. The net package already allows
// broadcasts on every UDP socket (SO_BROADCAST), on every platform.
func (c *client) broadcastTo(dst netip.AddrPort) {
	c.mu.Lock()
	c.broadcast = dst
	c.mu.Unlock()
}

// register registers as a foreign device with bbmd for ttl and waits for
// the BBMD's BVLC-Result.
func (c *client) register(ctx context.Context, bbmd netip.AddrPort, ttl time.Duration, timeout time.Duration) error {
	select { // a stale result from an earlier registration
	case <-c.results:
	default:
	}
	secs := uint16(ttl / time.Second)
	if _, err := c.conn.WriteToUDPAddrPort(wire.AppendRegisterForeignDevice(nil, secs), bbmd); err != nil {
		return fmt.Errorf("bacnet: register foreign device with %s: %w", bbmd, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case r := <-c.results:
			if r.from != bbmd {
				continue
			}
			if r.code != wire.ResultSuccessful {
				return fmt.Errorf("bacnet: BBMD %s refused the foreign device registration (result 0x%04x)", bbmd, r.code)
			}
			c.mu.Lock()
			c.bbmd = bbmd
			c.mu.Unlock()
			return nil
		case <-timer.C:
			return fmt.Errorf("bacnet: no answer from BBMD %s to the foreign device registration within %s: %w", bbmd, timeout, os.ErrDeadlineExceeded)
		case <-ctx.Done():
			return fmt.Errorf("bacnet: register with BBMD %s: %w", bbmd, ctx.Err())
		case <-c.done:
			return errClosed
		}
	}
}

// keepRegistered re-registers every ttl/2 until the client closes, so the
// BBMD's entry never lapses; failures are reported to onErr and retried
// at the next tick.
func (c *client) keepRegistered(bbmd netip.AddrPort, ttl, timeout time.Duration, onErr func(error)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(ttl / 2)
		defer t.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-t.C:
				if err := c.register(context.Background(), bbmd, ttl, timeout); err != nil && !errors.Is(err, net.ErrClosed) {
					onErr(err)
				}
			}
		}
	}()
}
