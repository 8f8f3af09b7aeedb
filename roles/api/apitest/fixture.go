package apitest

import (
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

// Ids of the rows SeededDB writes: two tenants, so that every test can
// check that one tenant's records stay out of the other's answers.
const (
	TenantA = "6f1c2a9e-3b7d-4c8a-9e21-0a1b2c3d4e5f"
	TenantB = "9a8b7c6d-5e4f-4321-8fed-cba987654321"
	// AgentA1 is in FleetA, AgentB1 in FleetB; AgentA2 and AgentA3 are in
	// no fleet.
	AgentA1 = "a1000000-0000-4000-8000-000000000001"
	AgentA2 = "a2000000-0000-4000-8000-000000000002"
	AgentA3 = "a3000000-0000-4000-8000-000000000003"
	AgentB1 = "b1000000-0000-4000-8000-000000000001"
	FleetA  = "f1000000-0000-4000-8000-000000000001"
	FleetB  = "f2000000-0000-4000-8000-000000000002"
)

// agents are the agents SeededDB can write: their tenant and fleet.
var agents = map[string]struct{ tenant, fleet string }{
	AgentA1: {TenantA, FleetA},
	AgentA2: {TenantA, ""},
	AgentA3: {TenantA, ""},
	AgentB1: {TenantB, FleetB},
}

// TenantOf returns the tenant of one of the agents SeededDB writes.
func TenantOf(agent string) string {
	a, ok := agents[agent]
	if !ok {
		panic("BUG: apitest.TenantOf: " + agent + " is none of the seeded agents")
	}
	return a.tenant
}

// SeededDB opens a migrated database of engine (dbtest.Migrated) and
// writes the tenants TenantA and TenantB, the fleets FleetA and FleetB,
// and of the agents those named (AgentA1, ...), each named "agent-"
// and the first two characters of its UUID; every row created at.
func SeededDB(t testing.TB, engine string, at time.Time, agentIDs ...string) *db.DB {
	t.Helper()
	d := dbtest.Migrated(t, engine)
	ta := d.Dialect().TimeArg(at)
	for _, tenant := range []string{TenantA, TenantB} {
		Exec(t, d, `INSERT INTO tenants (uuid, name, created_at) VALUES ($1, $2, $3)`, tenant, "tenant "+tenant[:4], ta)
	}
	for _, f := range [][2]string{{FleetA, TenantA}, {FleetB, TenantB}} {
		Exec(t, d, `INSERT INTO fleets (id, tenant_uuid, name, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)`, f[0], f[1], "fleet-"+f[0][:2], ta)
	}
	for _, id := range agentIDs {
		a := agents[id]
		Exec(t, d, `INSERT INTO agents (uuid, tenant_uuid, name, created_at, updated_at, fleet_id) VALUES ($1, $2, $3, $4, $4, $5)`,
			id, TenantOf(id), "agent-"+id[:2], ta, db.UUIDArg(a.fleet))
	}
	return d
}

// Exec runs a statement on d, failing the test when it fails.
func Exec(t testing.TB, d *db.DB, q string, args ...any) {
	t.Helper()
	if _, err := d.SQL().ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// Engines are the cloud's database engines: PostgreSQL, and SQLite as
// all-in-one runs it.
var Engines = []string{"postgres", "sqlite"}

// ForEngines runs fn as a parallel subtest on each of Engines.
func ForEngines(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, engine := range Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			fn(t, engine)
		})
	}
}

// Clock is a fake clock that tests move by hand, safe to read from the
// goroutines of the code under test.
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	tick time.Duration
}

// NewClock returns a clock standing at start until Add moves it.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// NewTickingClock returns a clock that also moves on by tick each time it
// is read, before answering, so that no two readings are equal.
func NewTickingClock(start time.Time, tick time.Duration) *Clock {
	return &Clock{now: start, tick: tick}
}

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.tick)
	return c.now
}

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
