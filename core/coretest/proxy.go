package coretest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server and can cut them at a moment
// the test picks by what the client sends: a fault between two requests
// that killing the server from outside hits only by luck.
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	match []byte
	then  func()
	fired chan struct{}
	wg    sync.WaitGroup
}

// NewProxy listens on a free 127.0.0.1 port and forwards every connection
// to target; the test's cleanup closes it.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port, for the client.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// CutWhen arms the proxy once: the first client write containing match is
// not forwarded; then runs (killing the server, say) and every connection
// is closed. The returned channel closes after that.
func (p *Proxy) CutWhen(match []byte, then func()) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match, p.then, p.fired = match, then, make(chan struct{})
	return p.fired
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(c, s)
			_ = c.Close()
			p.forget(c)
		}()
		go func() {
			defer p.wg.Done()
			p.forward(c, s)
			_ = s.Close()
			p.forget(s)
		}()
	}
}

// forward copies client to server, watching for the armed match.
func (p *Proxy) forward(c, s net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			hit := p.match != nil && bytes.Contains(buf[:n], p.match)
			var then func()
			var fired chan struct{}
			if hit {
				then, fired, p.match = p.then, p.fired, nil
			}
			p.mu.Unlock()
			if hit {
				then()
				p.closeConns()
				close(fired)
				return
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = c.Close()
			}
			return
		}
	}
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) closeConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.closeConns()
	p.wg.Wait()
}
