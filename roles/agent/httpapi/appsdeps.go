package httpapi

import (
	"context"
	"errors"

	"github.com/edgeplat/edgeplat/core/control"
)

// Apps is what the /v1/apps, /v1/restart, /v1/purge and /v1/docker routes
// act on: the agent's applications, reconciled against the container
// runtime (docs/apps.md). Errors: ErrNotFound for an unknown app or
// service, *Error for what the client can fix (400 naming the field, 409
// for an item the cloud manages), ErrRuntimeDown when the runtime is
// needed and cannot be reached.
type Apps interface {
	// State merges the target with what the runtime reports; it answers
	// even when the runtime is down (Runtime.Status says so).
	State(ctx context.Context) (control.AppsState, error)
	// CreateApp adds an app to the local target state; an AppID of 0 is
	// assigned. The reconciler makes it so in the background.
	CreateApp(ctx context.Context, app control.TargetApp) (control.TargetApp, error)
	DeleteApp(ctx context.Context, appID int) error
	// AddService and PutService add or replace one service of an app;
	// a change in image, ports or environment recreates its container
	// blue-green.
	AddService(ctx context.Context, appID int, svc control.TargetService) (control.TargetService, error)
	PutService(ctx context.Context, appID int, svc control.TargetService) (control.TargetService, error)
	DeleteService(ctx context.Context, appID int, service string) error
	// Act starts, stops or restarts one service ("" for every service of
	// the app) and waits until the runtime did it. start and stop also
	// set the service's target state, so the reconciler keeps it so.
	Act(ctx context.Context, appID int, service string, action AppAction, force bool) (control.AppState, error)
	// Purge removes the app's volumes (its definition stays): its
	// containers are stopped, the volumes removed, the containers made
	// again. Without force a running app is refused (409).
	Purge(ctx context.Context, appID int, force bool) error
	// Logs streams a service's container log to emit until ctx ends
	// (follow) or the tail is sent.
	Logs(ctx context.Context, appID int, service string, opts LogOptions, emit func(LogLine) error) error

	RuntimeConfig(ctx context.Context) (RuntimeConfig, error)
	// SetRuntimeConfig saves the configuration and reconnects at once.
	SetRuntimeConfig(ctx context.Context, cfg RuntimeConfig) error
	// TestRuntime connects with cfg and reports the engine's version and
	// container count; nothing is saved.
	TestRuntime(ctx context.Context, cfg RuntimeConfig) (RuntimeTest, error)
}

// ErrRuntimeDown: the container runtime cannot be reached (503).
var ErrRuntimeDown = errors.New("the container runtime is not reachable")

// AppAction is a service action of POST .../services/:serviceName/:action.
type AppAction string

// The service actions.
const (
	ActionStart   AppAction = "start"
	ActionStop    AppAction = "stop"
	ActionRestart AppAction = "restart"
)

// LogOptions are the query of the service log stream.
type LogOptions struct {
	// Tail is how many past lines to send first: default 200, max 2000.
	Tail       int
	Follow     bool
	Timestamps bool
}

// LogLine is one event of the service log stream.
type LogLine struct {
	Msg    string `json:"msg"`
	Stream string `json:"stream"`
}

// RuntimeConfig is how the agent reaches the container runtime: type
// "socket" (SocketPath, default /var/run/docker.sock), "tcp" (Host, Port
// default 2375) or "tcp+tls" (Host, Port default 2376, CA, Cert, Key as
// PEM strings). The key is write-only: answers show whether one is set.
type RuntimeConfig struct {
	Type       string `json:"type"`
	SocketPath string `json:"socketPath,omitempty"`
	Host       string `json:"host,omitempty"`
	Port       int    `json:"port,omitempty"`
	CA         string `json:"ca,omitempty"`
	Cert       string `json:"cert,omitempty"`
	Key        string `json:"key,omitempty"`
}

// RuntimeTest is the answer of POST /v1/docker/test.
type RuntimeTest struct {
	Version    string `json:"version"`
	Containers int    `json:"containers"`
}
