package brokerusers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

// The test tenants: the caller's, and another.
const (
	tenantA   = "6f1c2a9e-3b7d-4c8a-9e21-0a1b2c3d4e5f"
	tenantB   = "9a8b7c6d-5e4f-4321-8fed-cba987654321"
	adminA    = "11111111-1111-4111-8111-111111111111"
	memberA   = "22222222-2222-4222-8222-222222222222"
	adminB    = "33333333-3333-4333-8333-333333333333"
	agentUUID = "0d5e7f10-2a3b-4c5d-8e9f-a0b1c2d3e4f5"
)

var engines = []string{"postgres", "sqlite"}

// newTestStore returns a store on a fresh migrated database of engine with
// both test tenants, reserving the names a deployment would.
func newTestStore(t *testing.T, engine string) (*Store, *db.DB) {
	t.Helper()
	d := dbtest.Migrated(t, engine)
	for _, tenant := range []string{tenantA, tenantB} {
		if _, err := d.SQL().ExecContext(context.Background(), `INSERT INTO tenants (uuid, name, created_at) VALUES ($1, $2, $3)`,
			tenant, "tenant "+tenant[:4], d.Dialect().TimeArg(time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	return NewStore(d, "edgeplat-api", "historian:plant1", ""), d
}

// topicPrefix returns i/{tenant}/ in topic form.
func topicPrefix(t testing.TB, tenant string) string {
	t.Helper()
	id, err := codec.IDFromUUID(tenant)
	if err != nil {
		t.Fatal(err)
	}
	return "i/" + id + "/"
}

func agentTopic(t testing.TB, tenant, suffix string) string {
	t.Helper()
	id, err := codec.IDFromUUID(agentUUID)
	if err != nil {
		t.Fatal(err)
	}
	return topicPrefix(t, tenant) + "a/" + id + "/" + suffix
}

// deviceStore is a brokerauth.Store for device keys that records the
// usernames it was asked about.
type deviceStore struct {
	mu    sync.Mutex
	asked []string
}

const (
	deviceKey      = "dk2_AbCdEfGh_0123456789012345678901234567890123456789"
	devicePassword = "device-mqtt-password"
)

func (s *deviceStore) AuthenticateDevice(_ context.Context, username, password string) (brokerauth.Identity, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, username)
	if username != deviceKey || password != devicePassword {
		return brokerauth.Identity{}, fmt.Errorf("device key: %w", brokerauth.ErrDenied)
	}
	return brokerauth.Identity{Username: username, TenantUUID: tenantA, AgentUUID: agentUUID}, nil
}

func (s *deviceStore) askedFor() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}
