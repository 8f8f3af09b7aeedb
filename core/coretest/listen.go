package coretest

import (
	"context"
	"testing"

	"github.com/edgeplat/edgeplat/core/lifecycle"
)

// listener is a service that binds an address in Start (httpx.Server).
type listener interface {
	lifecycle.Service
	Addr() string
}

// Listen starts the first of services that listens, as the role's runner
// would, and returns the address it bound; it is stopped when the test
// ends. Tests of a role's address settings use it without running the
// whole role.
func Listen(t testing.TB, services []lifecycle.Service) string {
	t.Helper()
	for _, s := range services {
		if l, ok := s.(listener); ok {
			if err := l.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Stop(context.Background()) })
			return l.Addr()
		}
	}
	t.Fatal("no service listens")
	return ""
}
