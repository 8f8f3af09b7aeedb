// Package appstest gives the apps tests a podman API service
// (coretest.Podman) with what they use of it: the podman command and a
// Docker Engine API client of the reconciler's own library.
package appstest

import (
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TickerImage has a default command that prints a line a second.
const TickerImage = coretest.PodmanTicker

// Service is a running podman API service; Stop and Start end it and run
// it again on the same socket, as a runtime outage would.
type Service struct {
	*coretest.PodmanEngine
	t testing.TB
}

// Podman starts a private podman API service for t.
func Podman(t testing.TB) *Service {
	t.Helper()
	return &Service{PodmanEngine: coretest.Podman(t), t: t}
}

// Run runs the podman command with args against the service's storage.
func (p *Service) Run(args ...string) (string, error) {
	out, err := p.Command(args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Client is an API client of the service.
func (p *Service) Client() *client.Client {
	cli, err := client.New(client.WithHost(p.Host))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = cli.Close() })
	return cli
}
