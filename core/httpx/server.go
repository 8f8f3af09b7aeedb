// Package httpx holds what every HTTP role shares: a gin engine with bounded
// bodies, panic recovery and request logging, and an HTTP server that plugs
// into the lifecycle runner.
package httpx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/edgeplat/edgeplat/core/lifecycle"
)

// ServerOptions configures a Server.
type ServerOptions struct {
	// Name labels the service in logs; kebab-case, e.g. "api-http".
	Name    string
	Addr    string
	Handler http.Handler
	// PortHint names the flag or key that changes Addr; it is added to the
	// error when the port is already taken, so the operator knows the fix.
	PortHint          string
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	Logger            *slog.Logger
}

// Server is an http.Server as a lifecycle.Service. Start binds the port, so
// a taken port fails start-up before any other service runs.
type Server struct {
	opts ServerOptions
	srv  *http.Server
	ln   net.Listener
}

// NewServer validates opts without doing any I/O.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Name == "" || opts.Handler == nil {
		return nil, errors.New("httpx: server needs a name and a handler")
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return nil, fmt.Errorf("httpx: %s address %q: %w", opts.Name, opts.Addr, err)
	}
	if opts.ReadHeaderTimeout <= 0 {
		opts.ReadHeaderTimeout = 10 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 120 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{opts: opts}, nil
}

// Name implements lifecycle.Service.
func (s *Server) Name() string { return s.opts.Name }

// Handler is the server's handler, for tests that drive it without a
// listener.
func (s *Server) Handler() http.Handler { return s.opts.Handler }

// Addr is the bound address once Start has returned, else the configured one.
func (s *Server) Addr() string {
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.opts.Addr
}

// Start implements lifecycle.Service.
func (s *Server) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.opts.Addr)
	if err != nil {
		return ListenError(s.opts.Addr, s.opts.PortHint, err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.opts.Handler,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn),
	}
	s.opts.Logger.Info("http listening", "service", s.opts.Name, "addr", ln.Addr().String())
	return nil
}

// Run implements lifecycle.Service: it serves until ctx ends, then stops
// accepting and lets in-flight requests finish within the stop phase's
// deadline (lifecycle.DrainContext) before it closes what is left.
func (s *Server) Run(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}
	dctx, cancel := lifecycle.DrainContext(ctx)
	defer cancel()
	err := s.srv.Shutdown(dctx)
	if err != nil {
		_ = s.srv.Close()
		err = fmt.Errorf("shutdown %s: %w", s.Addr(), err)
	}
	<-served // http.ErrServerClosed, at once after Shutdown or Close
	return err
}

// Stop implements lifecycle.Service. Run has drained the server by now;
// Stop closes the listener of a server whose Run never began.
func (s *Server) Stop(context.Context) error {
	if s.srv == nil {
		return nil
	}
	_ = s.srv.Close()
	if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("close %s: %w", s.Addr(), err)
	}
	return nil
}

// ListenError turns a bind failure into one line that names the way out.
func ListenError(addr, hint string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) && hint != "" {
		return fmt.Errorf("%s is already in use; choose another port with %s", addr, hint)
	}
	if hint != "" {
		return fmt.Errorf("listen %s (set with %s): %w", addr, hint, err)
	}
	return fmt.Errorf("listen %s: %w", addr, err)
}

var _ lifecycle.Service = (*Server)(nil)
