// Package agent is the agent role: the edge agent's local HTTP API on port
// 48484, its lifecycle of six init phases, its SQLite store and the
// protocol endpoints it polls. It imports core and config only; cmd
// composes it.
//
// The HTTP server starts first and stops last, so /v1/readiness answers
// 503 while the agent initialises and in-flight requests drain at
// shutdown. The agent itself is one lifecycle service whose Run performs
// the init phases, retries them while one fails (a data directory on a
// disk that is not mounted yet should not need a restart), and performs
// soft reboots in place. A data directory it may not use ends it instead
// (see fatalError): no retry fixes a permission.
package agent

import (
	"log/slog"
	"net"
	"strconv"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/modbus"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/mqtt"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/opcua"
	"github.com/edgeplat/edgeplat/roles/agent/logring"
)

// Options carries what cmd decides beyond the config.
type Options struct {
	PortHint string
	// Drivers replaces the built-in protocol drivers (tests).
	Drivers []adapters.Driver
	// ReleaseStartupPages drops the executable pages start-up faulted in
	// once the agent runs (see sysinfo.ReleaseExecutablePages). Only the
	// agent alone on a device wants it; all-in-one's other roles would
	// fault them back.
	ReleaseStartupPages bool
}

// DefaultDrivers are the protocols the agent speaks.
func DefaultDrivers() []adapters.Driver {
	return []adapters.Driver{modbus.Driver{}, opcua.Driver{}, mqtt.Driver{}}
}

// New builds the role's services without doing I/O: the HTTP server first,
// then the agent. In LOCALHOST_ONLY mode the API binds loopback only; in
// key mode it binds every interface.
func New(cfg *config.Config, r *rt.Runtime, opts Options) ([]lifecycle.Service, error) {
	a, err := newAgent(cfg, r, opts)
	if err != nil {
		return nil, err
	}
	bind := "127.0.0.1"
	if cfg.Agent.KeyMode() {
		bind = "0.0.0.0"
	}
	srv, err := httpx.NewServer(httpx.ServerOptions{
		Name:     "agent-http",
		Addr:     net.JoinHostPort(bind, strconv.Itoa(cfg.Agent.Port)),
		Handler:  a.engine(),
		PortHint: opts.PortHint,
		Logger:   a.log,
	})
	if err != nil {
		return nil, err
	}
	a.server = srv
	return []lifecycle.Service{srv, a}, nil
}

// ringLogger tees the agent's logs into the ring GET /v1/logs reads.
func ringLogger(base *slog.Logger, ring *logring.Ring, level slog.Leveler) *slog.Logger {
	return slog.New(logring.Handler(base.Handler(), ring, level))
}
