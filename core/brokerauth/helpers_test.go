package brokerauth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
)

// The test tenants and agents: the device under test (tenant, agent), a
// second agent of its tenant, and an agent of another tenant.
const (
	tenantUUID      = "6f1c2a9e-3b7d-4c8a-9e21-0a1b2c3d4e5f"
	agentUUID       = "0d5e7f10-2a3b-4c5d-8e9f-a0b1c2d3e4f5"
	otherAgentUUID  = "1e2d3c4b-5a69-4788-9a0b-1c2d3e4f5a6b"
	otherTenantUUID = "9a8b7c6d-5e4f-4321-8fed-cba987654321"
	deviceKey       = "dk_live_7Qm2xZ"
	devicePassword  = "mqtt-pass-1"
	serviceUser     = "edgeplat-api"
	servicePassword = "service-secret"
)

func topicID(t testing.TB, uuid string) string {
	t.Helper()
	id, err := codec.IDFromUUID(uuid)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// topicOf expands {T} (own tenant), {A} (own agent), {A2} (other agent of
// the tenant) and {T2} (other tenant) in a topic template.
func topicOf(t testing.TB, tmpl string) string {
	t.Helper()
	return strings.NewReplacer(
		"{T2}", topicID(t, otherTenantUUID),
		"{A2}", topicID(t, otherAgentUUID),
		"{T}", topicID(t, tenantUUID),
		"{A}", topicID(t, agentUUID),
	).Replace(tmpl)
}

func device() Identity {
	return Identity{Username: deviceKey, TenantUUID: tenantUUID, AgentUUID: agentUUID}
}

// memStore is an in-memory Store: username -> password and identity.
type memStore struct {
	mu      sync.Mutex
	devices map[string]memDevice
	err     error         // returned by every call when set
	gate    chan struct{} // when set, calls wait for it (or their context)
	entered chan struct{} // when set, receives one value per call as it starts
	calls   int
}

type memDevice struct {
	password string
	id       Identity
}

func newMemStore() *memStore {
	s := &memStore{devices: map[string]memDevice{}}
	s.add(deviceKey, devicePassword, tenantUUID, agentUUID)
	return s
}

func (s *memStore) add(key, password, tenant, agent string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devices[key] = memDevice{password: password, id: Identity{Username: key, TenantUUID: tenant, AgentUUID: agent}}
}

func (s *memStore) revoke(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.devices, key)
}

func (s *memStore) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *memStore) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *memStore) AuthenticateDevice(ctx context.Context, username, password string) (Identity, error) {
	s.mu.Lock()
	s.calls++
	gate, entered := s.gate, s.entered
	s.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return Identity{}, fmt.Errorf("query device: %w", ctx.Err())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return Identity{}, s.err
	}
	d, ok := s.devices[username]
	if !ok || d.password != password {
		return Identity{}, fmt.Errorf("device key: %w", ErrDenied)
	}
	return d.id, nil
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newTestAuthorizer builds an Authorizer over store with a fake clock and
// a recorder of deny events.
func newTestAuthorizer(t testing.TB, store Store, mod func(*Options)) (*Authorizer, *fakeClock, *denyLog) {
	t.Helper()
	denies := &denyLog{}
	opts := Options{
		Store:        store,
		ServiceUsers: map[string]config.Secret{serviceUser: servicePassword},
		CacheTTL:     5 * time.Minute,
		OnDeny:       denies.record,
	}
	if mod != nil {
		mod(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	a.now = clk.Now
	return a, clk, denies
}

type denyLog struct {
	mu     sync.Mutex
	events []DenyEvent
}

func (d *denyLog) record(_ context.Context, ev DenyEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, ev)
}

func (d *denyLog) last() (DenyEvent, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.events) == 0 {
		return DenyEvent{}, false
	}
	return d.events[len(d.events)-1], true
}

func (d *denyLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.events)
}

var errStoreDown = errors.New("connection refused")
