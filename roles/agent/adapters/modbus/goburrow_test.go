package modbus

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/goburrow/modbus"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// These tests pin the behaviour of github.com/goburrow/modbus v0.1.0 (2018,
// unmaintained) that the adapter relies on or works around; README.md,
// "goburrow/modbus", lists them. An upgrade that changes any of it fails
// here, before it changes what the adapter does.

// TestGoburrowVersion: the list in README.md is for v0.1.0.
func TestGoburrowVersion(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/goburrow/modbus (\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod does not require github.com/goburrow/modbus")
	}
	if string(m[1]) != "v0.1.0" {
		t.Fatalf("goburrow/modbus is %s: re-check the behaviours pinned here and the README's list", m[1])
	}
}

// scriptedServer is a Modbus TCP server whose answers the test writes: it
// records each request ADU and replies with answer(request) on the one
// connection it accepts at a time.
type scriptedServer struct {
	ln      net.Listener
	answer  func(req []byte) []byte
	mu      sync.Mutex
	reqs    [][]byte
	accepts int
	wg      sync.WaitGroup
}

func newScriptedServer(t *testing.T, answer func(req []byte) []byte) *scriptedServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptedServer{ln: ln, answer: answer}
	s.wg.Go(s.serve)
	t.Cleanup(func() { _ = ln.Close(); s.wg.Wait() })
	return s
}

func (s *scriptedServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.accepts++
		s.mu.Unlock()
		s.wg.Go(func() {
			defer c.Close()
			for {
				hdr := make([]byte, 7)
				if _, err := io.ReadFull(c, hdr); err != nil {
					return
				}
				pdu := make([]byte, int(binary.BigEndian.Uint16(hdr[4:6]))-1)
				if _, err := io.ReadFull(c, pdu); err != nil {
					return
				}
				req := append(hdr, pdu...)
				s.mu.Lock()
				s.reqs = append(s.reqs, req)
				s.mu.Unlock()
				if _, err := c.Write(s.answer(req)); err != nil {
					return
				}
			}
		})
	}
}

func (s *scriptedServer) seen() (reqs [][]byte, accepts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.reqs...), s.accepts
}

// reply builds a response ADU to req with the given PDU, and transaction
// id tid (req's own when tid < 0).
func reply(req, pdu []byte, tid int) []byte {
	out := make([]byte, 7, 7+len(pdu))
	copy(out, req[:7])
	if tid >= 0 {
		binary.BigEndian.PutUint16(out[0:2], uint16(tid))
	}
	binary.BigEndian.PutUint16(out[4:6], uint16(len(pdu)+1))
	return append(out, pdu...)
}

func goburrowClient(t *testing.T, addr string) (modbus.Client, *modbus.TCPClientHandler) {
	t.Helper()
	h := modbus.NewTCPClientHandler(addr)
	h.SlaveId = 7
	h.Timeout = 5 * time.Second
	h.IdleTimeout = 0
	t.Cleanup(func() { _ = h.Close() })
	return modbus.NewClient(h), h
}

func TestGoburrowContract(t *testing.T) {
	t.Run("request ADU: MBAP header, unit id, FC 3, incrementing transaction id", func(t *testing.T) {
		s := newScriptedServer(t, func(req []byte) []byte { return reply(req, []byte{3, 4, 0x12, 0x34, 0x56, 0x78}, -1) })
		c, _ := goburrowClient(t, s.ln.Addr().String())
		for range 2 {
			got, err := c.ReadHoldingRegisters(10, 2)
			if err != nil || string(got) != "\x12\x34\x56\x78" {
				t.Fatalf("ReadHoldingRegisters = %x, %v", got, err)
			}
		}
		reqs, _ := s.seen()
		if len(reqs) != 2 {
			t.Fatalf("%d requests", len(reqs))
		}
		// protocol 0, length 6, unit 7, FC 3, start 10, quantity 2
		want := "\x00\x00\x00\x06\x07\x03\x00\x0a\x00\x02"
		for i, r := range reqs {
			if string(r[2:]) != want {
				t.Errorf("request %d = % x, want .. .. % x", i, r, want)
			}
		}
		if a, b := binary.BigEndian.Uint16(reqs[0]), binary.BigEndian.Uint16(reqs[1]); b != a+1 {
			t.Errorf("transaction ids %d then %d", a, b)
		}
	})

	t.Run("exception reply is a *ModbusError with its code", func(t *testing.T) {
		s := newScriptedServer(t, func(req []byte) []byte { return reply(req, []byte{0x83, exceptionSlaveBusy}, -1) })
		c, _ := goburrowClient(t, s.ln.Addr().String())
		_, err := c.ReadHoldingRegisters(0, 1)
		var me *modbus.ModbusError
		if !errors.As(err, &me) || me.ExceptionCode != exceptionSlaveBusy {
			t.Fatalf("err = %#v, want *ModbusError with code 6", err)
		}
		if q, transport := classifyRequestError(err); transport || adapters.Classify(q) != adapters.CodeDeviceBusy {
			t.Errorf("classified as %v (transport %v), want DEVICE_BUSY", adapters.Classify(q), transport)
		}
	})

	// A late answer to a timed-out request arrives with the previous
	// transaction id. goburrow returns a plain error and keeps the
	// connection, so every later answer would be one behind: the adapter
	// closes the connection itself (resyncIfNeeded).
	t.Run("wrong transaction id: plain error, connection kept", func(t *testing.T) {
		n := 0
		s := newScriptedServer(t, func(req []byte) []byte {
			n++
			tid := -1
			if n == 1 {
				tid = int(binary.BigEndian.Uint16(req[0:2])) + 100
			}
			return reply(req, []byte{3, 2, 0, 1}, tid)
		})
		c, _ := goburrowClient(t, s.ln.Addr().String())
		_, err := c.ReadHoldingRegisters(0, 1)
		var me *modbus.ModbusError
		if err == nil || errors.As(err, &me) || isTransportError(err) {
			t.Fatalf("err = %#v, want a plain error", err)
		}
		if q, transport := classifyRequestError(err); transport || adapters.Classify(q) != adapters.CodeBadData {
			t.Errorf("classified as %v (transport %v), want BAD_DATA on a live connection", adapters.Classify(q), transport)
		}
		if _, err := c.ReadHoldingRegisters(0, 1); err != nil {
			t.Fatal(err)
		}
		if _, accepts := s.seen(); accepts != 1 {
			t.Errorf("goburrow dialled %d times; the adapter's resync relies on it keeping the connection", accepts)
		}
	})

	t.Run("wrong byte count: plain error", func(t *testing.T) {
		s := newScriptedServer(t, func(req []byte) []byte { return reply(req, []byte{3, 4, 0, 1}, -1) })
		c, _ := goburrowClient(t, s.ln.Addr().String())
		_, err := c.ReadHoldingRegisters(0, 2)
		if q, transport := classifyRequestError(err); err == nil || transport || adapters.Classify(q) != adapters.CodeBadData {
			t.Fatalf("err %v classified as %v (transport %v), want BAD_DATA", err, adapters.Classify(q), transport)
		}
	})

	// goburrow dials on the first request, not when the client is made, so
	// the adapter's Connect dials explicitly to report a refused connection.
	t.Run("no dial until Connect or a request", func(t *testing.T) {
		addr := "127.0.0.1:" + strconv.Itoa(coretest.FreePort(t))
		c, h := goburrowClient(t, addr)
		if c == nil {
			t.Fatal("no client")
		}
		err := h.Connect()
		if err == nil || !isTransportError(err) {
			t.Fatalf("Connect to a closed port = %v, want a transport error", err)
		}
		if _, err := c.ReadHoldingRegisters(0, 1); err == nil || !isTransportError(err) {
			t.Fatalf("request to a closed port = %v, want a transport error", err)
		}
	})
}
