package registry

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// The test tenants: the caller's, and another.
const (
	tenantA   = "6f1c2a9e-3b7d-4c8a-9e21-0a1b2c3d4e5f"
	tenantB   = "9a8b7c6d-5e4f-4321-8fed-cba987654321"
	adminA    = "11111111-1111-4111-8111-111111111111"
	unknownID = "00000000-0000-4000-8000-000000000000"
)

var engines = []string{"postgres", "sqlite"}

// newTestStore returns a store on a fresh migrated database of engine with
// both test tenants.
func newTestStore(t *testing.T, engine string) (*Store, *db.DB) {
	t.Helper()
	d := dbtest.Migrated(t, engine)
	for _, tenant := range []string{tenantA, tenantB} {
		if _, err := d.SQL().ExecContext(t.Context(), `INSERT INTO tenants (uuid, name, created_at) VALUES ($1, $2, $3)`,
			tenant, "tenant "+tenant[:4], d.Dialect().TimeArg(time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	return NewStore(d), d
}

// forEngines runs fn, in parallel, on a fresh store of each engine.
func forEngines(t *testing.T, fn func(t *testing.T, s *Store)) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s, _ := newTestStore(t, engine)
			fn(t, s)
		})
	}
}

func mustCreate(t *testing.T, s *Store, tenant string, n NewAgent) Agent {
	t.Helper()
	a, err := s.CreateAgent(t.Context(), tenant, n, nil)
	if err != nil {
		t.Fatalf("create agent %q: %v", n.Name, err)
	}
	return a
}

// limit admits agents while the installation has fewer than n.
func limit(n int) func(int) error {
	return func(agents int) error {
		if agents >= n {
			return &licence.Error{Code: "agent_limit", Message: "the licence allows no more agents"}
		}
		return nil
	}
}

func TestAgentsIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		loc := &Location{Latitude: 48.1, Longitude: 11.6, Label: "hall 3"}
		mustFleet(t, s, tenantA, "north", nil)
		press := mustCreate(t, s, tenantA, NewAgent{Name: " press 7 ", Version: "1.2.0", Fleet: "north", Tags: map[string]string{"line": "3"}, Location: loc})
		if press.Name != "press 7" || press.State != "registered" || !press.Active || press.TenantID != tenantA || press.UUID == "" {
			t.Errorf("created agent = %+v", press)
		}
		const given = "0D5E7F10-2A3B-4C5D-8E9F-A0B1C2D3E4F5"
		lathe := mustCreate(t, s, tenantA, NewAgent{UUID: given, Name: "lathe"})
		if lathe.UUID != strings.ToLower(given) || lathe.Tags == nil {
			t.Errorf("agent with a given uuid = %+v", lathe)
		}
		foreign := mustCreate(t, s, tenantB, NewAgent{Name: "foreign"})

		for _, tt := range []struct {
			name  string
			agent NewAgent
			admit func(int) error
			want  error
		}{
			{"taken uuid", NewAgent{UUID: lathe.UUID, Name: "x"}, nil, ErrConflict},
			{"another tenant's uuid", NewAgent{UUID: foreign.UUID, Name: "x"}, nil, ErrConflict},
			{"malformed uuid", NewAgent{UUID: "lathe-1", Name: "x"}, nil, ErrInvalid},
			{"blank name", NewAgent{Name: " "}, nil, ErrInvalid},
			{"long version", NewAgent{Name: "x", Version: strings.Repeat("1", 101)}, nil, ErrInvalid},
			{"blank tag key", NewAgent{Name: "x", Tags: map[string]string{"": "v"}}, nil, ErrInvalid},
			{"latitude", NewAgent{Name: "x", Location: &Location{Latitude: -91}}, nil, ErrInvalid},
		} {
			if _, err := s.CreateAgent(ctx, tenantA, tt.agent, tt.admit); !errors.Is(err, tt.want) {
				t.Errorf("CreateAgent, %s: %v, want %v", tt.name, err, tt.want)
			}
		}
		var le *licence.Error
		if _, err := s.CreateAgent(ctx, tenantA, NewAgent{Name: "x"}, limit(3)); !errors.As(err, &le) {
			t.Errorf("CreateAgent over the licence: %v, want the licence's error", err)
		}
		if n, err := s.CountAgents(ctx); err != nil || n != 3 {
			t.Errorf("CountAgents = %d, %v; want 3", n, err)
		}

		got, err := s.Agent(ctx, tenantA, strings.ToUpper(press.UUID))
		if err != nil || got.Name != "press 7" || got.Location == nil || *got.Location != *loc || got.Tags["line"] != "3" || got.LastSeen != nil {
			t.Errorf("Agent = %+v, %v", got, err)
		}
		for _, tt := range []struct{ name, tenant, uuid string }{
			{"another tenant's agent", tenantB, press.UUID},
			{"unknown uuid", tenantA, unknownID},
			{"malformed uuid", tenantA, "press"},
		} {
			if _, err := s.Agent(ctx, tt.tenant, tt.uuid); !errors.Is(err, ErrNotFound) {
				t.Errorf("Agent, %s: %v, want ErrNotFound", tt.name, err)
			}
		}
		if list, err := s.Agents(ctx, tenantA); err != nil || !slices.Equal(agentNames(list), []string{"lathe", "press 7"}) {
			t.Errorf("Agents = %v, %v; want by name", agentNames(list), err)
		}
		if list, err := s.Locations(ctx, tenantA); err != nil || !slices.Equal(agentNames(list), []string{"press 7"}) {
			t.Errorf("Locations = %v, %v", agentNames(list), err)
		}
		// A location tag places an agent without the field.
		tagged, err := s.CreateAgent(ctx, tenantA, NewAgent{Name: "mill", Tags: map[string]string{LocationTag: "48.1, 11.6"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if list, err := s.Locations(ctx, tenantA); err != nil || !slices.Equal(agentNames(list), []string{"mill", "press 7"}) ||
			*list[0].Location != (Location{Latitude: 48.1, Longitude: 11.6}) {
			t.Errorf("Locations with a location tag = %v, %v", agentNames(list), err)
		}
		if _, err := s.DeleteAgent(ctx, tenantA, tagged.UUID); err != nil {
			t.Fatal(err)
		}
		owned, err := s.Owned(ctx, tenantA, []string{press.UUID, strings.ToUpper(lathe.UUID), lathe.UUID, foreign.UUID, unknownID, "junk"})
		if err != nil || len(owned) != 2 || !owned[press.UUID] || !owned[lathe.UUID] {
			t.Errorf("Owned = %v, %v; want the two agents of the tenant", owned, err)
		}
		if owned, err := s.Owned(ctx, tenantA, nil); err != nil || len(owned) != 0 {
			t.Errorf("Owned of none = %v, %v", owned, err)
		}
	})
}

func agentNames(agents []Agent) []string {
	var names []string
	for _, a := range agents {
		names = append(names, a.Name)
	}
	return names
}

func TestUpdateAgentsIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		a := mustCreate(t, s, tenantA, NewAgent{Name: "press", Tags: map[string]string{"site": "north"}})
		mustCreate(t, s, tenantA, NewAgent{Name: "lathe", Tags: map[string]string{"site": "south", "line": "3"}})
		ptr := func(s string) *string { return &s }
		for _, tt := range []struct {
			name, tenant, uuid string
			up                 AgentUpdate
			want               error
		}{
			{"blank name", tenantA, a.UUID, AgentUpdate{Name: ptr("")}, ErrInvalid},
			{"long version", tenantA, a.UUID, AgentUpdate{Version: ptr(strings.Repeat("v", 101))}, ErrInvalid},
			{"unknown fleet", tenantA, a.UUID, AgentUpdate{Fleet: ptr("nowhere")}, ErrInvalid},
			{"state with a control character", tenantA, a.UUID, AgentUpdate{State: ptr("o\tk")}, ErrInvalid},
			{"longitude", tenantA, a.UUID, AgentUpdate{Location: &Location{Longitude: 181}}, ErrInvalid},
			{"another tenant's agent", tenantB, a.UUID, AgentUpdate{Name: ptr("mine")}, ErrNotFound},
			{"malformed uuid", tenantA, "press", AgentUpdate{Name: ptr("mine")}, ErrNotFound},
		} {
			if _, err := s.UpdateAgent(ctx, tt.tenant, tt.uuid, tt.up); !errors.Is(err, tt.want) {
				t.Errorf("UpdateAgent, %s: %v, want %v", tt.name, err, tt.want)
			}
		}
		mustFleet(t, s, tenantA, "north", nil)
		up, err := s.UpdateAgent(ctx, tenantA, a.UUID, AgentUpdate{Name: ptr("press 7"), Version: ptr("2.0"), Fleet: ptr("north"),
			State: ptr("running"), Location: &Location{Latitude: 1, Longitude: 2}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Agent(ctx, tenantA, a.UUID)
		if err != nil || got.Name != "press 7" || got.Version != "2.0" || got.Fleet != "north" || got.State != "running" ||
			got.Location == nil || got.Location.Longitude != 2 || got.Tags["site"] != "north" || !got.UpdatedAt.Equal(up.UpdatedAt) {
			t.Errorf("stored after the update = %+v, %v", got, err)
		}

		if _, err := s.SetTags(ctx, tenantA, a.UUID, map[string]string{" ": "x"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetTags with a blank key: %v, want ErrInvalid", err)
		}
		if _, err := s.SetTags(ctx, tenantB, a.UUID, map[string]string{"site": "x"}); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetTags of another tenant's agent: %v, want ErrNotFound", err)
		}
		if got, err := s.SetTags(ctx, tenantA, a.UUID, map[string]string{"site": "south", "line": "4"}); err != nil || len(got.Tags) != 2 {
			t.Errorf("SetTags = %+v, %v", got.Tags, err)
		}
		for _, tt := range []struct {
			want  map[string]string
			names []string
		}{
			{map[string]string{"site": "south"}, []string{"lathe", "press 7"}},
			{map[string]string{"line": "3"}, []string{"lathe"}},
			{map[string]string{"line": "*"}, []string{"lathe", "press 7"}},
			{map[string]string{"zone": "*"}, nil},
			{nil, []string{"lathe", "press 7"}},
		} {
			got, err := s.AgentsByTags(ctx, tenantA, tt.want)
			if err != nil || !slices.Equal(agentNames(got), tt.names) {
				t.Errorf("AgentsByTags(%v) = %v, %v; want %v", tt.want, agentNames(got), err, tt.names)
			}
		}
		if got, err := s.AgentsByTags(ctx, tenantB, nil); err != nil || len(got) != 0 {
			t.Errorf("another tenant's AgentsByTags = %v, %v", agentNames(got), err)
		}

		if got, err := s.SetActive(ctx, tenantA, a.UUID, false); err != nil || got.Active {
			t.Errorf("SetActive(false) = %+v, %v", got, err)
		}
		if _, err := s.SetActive(ctx, tenantB, a.UUID, true); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetActive of another tenant's agent: %v, want ErrNotFound", err)
		}
		if got, _ := s.Agent(ctx, tenantA, a.UUID); got.Active || got.Name != "press 7" {
			t.Errorf("stored after SetActive = %+v", got)
		}
	})
}

func TestProvisioningKeysIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		now := time.Now()
		a := mustCreate(t, s, tenantA, NewAgent{Name: "press"})
		foreign := mustCreate(t, s, tenantB, NewAgent{Name: "foreign"})
		for _, tt := range []struct {
			name string
			n    NewProvisioningKey
			want error
		}{
			{"expiry in the past", NewProvisioningKey{ExpiresAt: now.Add(-time.Minute)}, ErrInvalid},
			{"expiry beyond a year", NewProvisioningKey{ExpiresAt: now.Add(MaxProvisioningTTL + time.Hour)}, ErrInvalid},
			{"negative lifetime", NewProvisioningKey{TTL: -time.Hour}, ErrInvalid},
			{"long name", NewProvisioningKey{Name: strings.Repeat("n", maxNameLen+1)}, ErrInvalid},
			{"another tenant's agent", NewProvisioningKey{AgentUUID: foreign.UUID}, ErrNotFound},
			{"malformed agent", NewProvisioningKey{AgentUUID: "press"}, ErrNotFound},
		} {
			if _, _, err := s.CreateProvisioningKey(ctx, tenantA, adminA, tt.n); !errors.Is(err, tt.want) {
				t.Errorf("CreateProvisioningKey, %s: %v, want %v", tt.name, err, tt.want)
			}
		}
		north := mustFleet(t, s, tenantA, "north", nil)
		if _, _, err := s.CreateProvisioningKey(ctx, tenantA, adminA, NewProvisioningKey{Fleet: "south"}); !errors.Is(err, ErrInvalid) ||
			!strings.Contains(err.Error(), "POST /fleets") {
			t.Errorf("CreateProvisioningKey, unknown fleet: %v, want ErrInvalid telling to create it", err)
		}
		k, plain, err := s.CreateProvisioningKey(ctx, tenantA, adminA, NewProvisioningKey{Name: " line 3 ", Fleet: " north "})
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := splitKey(plain, provisioningScheme); !ok || p != k.Prefix || k.Name != "line 3" || k.Fleet != "north" || k.FleetID != north.ID {
			t.Errorf("key %+v, plaintext %q", k, plain)
		}
		if d := k.ExpiresAt.Sub(k.CreatedAt); d != DefaultProvisioningTTL {
			t.Errorf("default lifetime %s, want %s", d, DefaultProvisioningTTL)
		}
		bound, _, err := s.CreateProvisioningKey(ctx, tenantA, "", NewProvisioningKey{AgentUUID: strings.ToUpper(a.UUID), TTL: time.Hour})
		if err != nil || bound.AgentUUID != a.UUID || bound.ExpiresAt.Sub(bound.CreatedAt) != time.Hour {
			t.Errorf("key for an agent = %+v, %v", bound, err)
		}
		keys, err := s.ProvisioningKeys(ctx, tenantA)
		if err != nil || len(keys) != 2 || keys[0].ID != bound.ID || keys[0].AgentUUID != a.UUID || keys[1].Fleet != "north" {
			t.Errorf("ProvisioningKeys = %+v, %v; want both, newest first", keys, err)
		}
		if keys, err := s.ProvisioningKeys(ctx, tenantB); err != nil || len(keys) != 0 {
			t.Errorf("another tenant's ProvisioningKeys = %+v, %v", keys, err)
		}
		for _, tt := range []struct{ name, tenant, id string }{
			{"another tenant", tenantB, k.ID},
			{"unknown id", tenantA, unknownID},
			{"malformed id", tenantA, "key"},
		} {
			if err := s.DeleteProvisioningKey(ctx, tt.tenant, tt.id); !errors.Is(err, ErrNotFound) {
				t.Errorf("DeleteProvisioningKey, %s: %v, want ErrNotFound", tt.name, err)
			}
		}
		if err := s.DeleteProvisioningKey(ctx, tenantA, k.ID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Register(ctx, Registration{Key: plain, AgentName: "x"}, nil); !errors.Is(err, ErrKeyRefused) {
			t.Errorf("registering with a deleted key: %v, want ErrKeyRefused", err)
		}
		// An expired key is neither listed nor usable.
		_, short, err := s.CreateProvisioningKey(ctx, tenantA, adminA, NewProvisioningKey{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		s.now = func() time.Time { return time.Now().UTC().Add(2 * time.Minute) }
		if keys, _ := s.ProvisioningKeys(ctx, tenantA); len(keys) != 1 {
			t.Errorf("%d keys listed after one expired, want 1", len(keys))
		}
		if _, _, err := s.Register(ctx, Registration{Key: short, AgentName: "x"}, nil); !errors.Is(err, ErrKeyRefused) {
			t.Errorf("registering with an expired key: %v, want ErrKeyRefused", err)
		}
	})
}

func TestRegisterIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		newKey := func(n NewProvisioningKey) string {
			t.Helper()
			_, plain, err := s.CreateProvisioningKey(ctx, tenantA, adminA, n)
			if err != nil {
				t.Fatal(err)
			}
			return plain
		}
		mustFleet(t, s, tenantA, "north", nil)
		key := newKey(NewProvisioningKey{Fleet: "north"})
		creds, revoked, err := s.Register(ctx, Registration{Key: " " + key + " ", AgentName: "press", Version: "1.0"}, limit(10))
		if err != nil {
			t.Fatal(err)
		}
		a := creds.Agent
		if a.TenantID != tenantA || a.Fleet != "north" || a.Name != "press" || a.Version != "1.0" || len(revoked) != 0 {
			t.Errorf("registered %+v, revoked %v", a, revoked)
		}
		if kid, ok := splitKey(creds.APIKey, deviceScheme); !ok || kid != creds.Kid || len(creds.MQTTPassword) != mqttPasswordLen {
			t.Errorf("credentials %+v", creds)
		}
		if _, _, err := s.Register(ctx, Registration{Key: key, AgentName: "press"}, nil); !errors.Is(err, ErrKeyRefused) {
			t.Errorf("a used key: %v, want ErrKeyRefused", err)
		}

		foreign := mustCreate(t, s, tenantB, NewAgent{Name: "foreign"})
		for _, tt := range []struct {
			name  string
			r     Registration
			admit func(int) error
			want  error
		}{
			{"malformed key", Registration{Key: "pk_short", AgentName: "x"}, nil, ErrKeyRefused},
			{"device key", Registration{Key: creds.APIKey, AgentName: "x"}, nil, ErrKeyRefused},
			{"unknown key", Registration{Key: provisioningScheme + "AAAAAAAA_" + strings.Repeat("a", secretLen), AgentName: "x"}, nil, ErrKeyRefused},
			{"blank name", Registration{Key: newKey(NewProvisioningKey{}), AgentName: " "}, nil, ErrInvalid},
			{"registered agent of the tenant", Registration{Key: newKey(NewProvisioningKey{}), AgentName: "x", AgentUUID: a.UUID}, nil, ErrConflict},
			{"another tenant's agent", Registration{Key: newKey(NewProvisioningKey{}), AgentName: "x", AgentUUID: foreign.UUID}, nil, ErrConflict},
			{"another agent than the key's", Registration{Key: newKey(NewProvisioningKey{AgentUUID: a.UUID}), AgentName: "x", AgentUUID: unknownID}, nil, ErrConflict},
		} {
			if _, _, err := s.Register(ctx, tt.r, tt.admit); !errors.Is(err, tt.want) {
				t.Errorf("Register, %s: %v, want %v", tt.name, err, tt.want)
			}
		}
		var le *licence.Error
		overKey := newKey(NewProvisioningKey{})
		if _, _, err := s.Register(ctx, Registration{Key: overKey, AgentName: "x"}, limit(2)); !errors.As(err, &le) {
			t.Errorf("Register over the licence: %v, want the licence's error", err)
		}
		// A refused registration leaves its key usable.
		if _, _, err := s.Register(ctx, Registration{Key: overKey, AgentName: "lathe", AgentUUID: unknownID}, limit(10)); err != nil {
			t.Errorf("the key of a refused registration: %v", err)
		}

		// A key made for the agent re-provisions it: new credentials, the
		// old ones revoked, a disabled agent left disabled.
		if _, err := s.SetActive(ctx, tenantA, a.UUID, false); err != nil {
			t.Fatal(err)
		}
		again, revoked, err := s.Register(ctx, Registration{Key: newKey(NewProvisioningKey{AgentUUID: a.UUID}), AgentName: "press 2", Version: "2.0"}, limit(1))
		if err != nil {
			t.Fatalf("re-provisioning (the licence counts no new agent): %v", err)
		}
		if again.Agent.UUID != a.UUID || again.Agent.Name != "press 2" || again.Agent.Active || !slices.Equal(revoked, []string{creds.Kid}) ||
			again.APIKey == creds.APIKey {
			t.Errorf("re-provisioned %+v, revoked %v", again, revoked)
		}
		if _, err := s.DeviceByKey(ctx, creds.APIKey); !errors.Is(err, ErrDeviceDenied) {
			t.Errorf("the old device key after re-provisioning: %v, want ErrDeviceDenied", err)
		}
	})
}

func TestDeviceKeysIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		a := mustCreate(t, s, tenantA, NewAgent{Name: "press"})
		foreign := mustCreate(t, s, tenantB, NewAgent{Name: "foreign"})
		creds, err := s.IssueDeviceKey(ctx, tenantA, strings.ToUpper(a.UUID))
		if err != nil || creds.Agent.UUID != a.UUID {
			t.Fatalf("IssueDeviceKey = %+v, %v", creds, err)
		}
		if _, err := s.IssueDeviceKey(ctx, tenantA, foreign.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("IssueDeviceKey for another tenant's agent: %v, want ErrNotFound", err)
		}
		dev, err := s.DeviceByKey(ctx, creds.APIKey)
		if err != nil || dev != (Device{TenantUUID: tenantA, AgentUUID: a.UUID, Kid: creds.Kid}) {
			t.Errorf("DeviceByKey = %+v, %v", dev, err)
		}
		id, err := s.AuthenticateDevice(ctx, creds.APIKey, creds.MQTTPassword)
		if err != nil || id.TenantUUID != tenantA || id.AgentUUID != a.UUID || id.Username != creds.APIKey {
			t.Errorf("AuthenticateDevice = %+v, %v", id, err)
		}
		for _, tt := range []struct{ name, key, password string }{
			{"wrong MQTT password", creds.APIKey, creds.MQTTPassword + "x"},
			{"wrong secret", withOtherLastChar(creds.APIKey), creds.MQTTPassword},
			{"malformed key", "dk2_short", creds.MQTTPassword},
			{"unknown kid", deviceScheme + "ZZZZZZZZ" + creds.APIKey[len(deviceScheme)+prefixLen:], creds.MQTTPassword},
		} {
			if _, err := s.AuthenticateDevice(ctx, tt.key, tt.password); !errors.Is(err, brokerauth.ErrDenied) {
				t.Errorf("AuthenticateDevice, %s: %v, want brokerauth.ErrDenied", tt.name, err)
			}
		}

		// A disabled agent's keys stop working until it is enabled.
		if _, err := s.SetActive(ctx, tenantA, a.UUID, false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeviceByKey(ctx, creds.APIKey); !errors.Is(err, ErrDeviceDenied) {
			t.Errorf("the key of a disabled agent: %v, want ErrDeviceDenied", err)
		}
		if _, err := s.SetActive(ctx, tenantA, a.UUID, true); err != nil {
			t.Fatal(err)
		}
		second, err := s.IssueDeviceKey(ctx, tenantA, a.UUID)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := s.DeviceKeys(ctx, tenantA, a.UUID)
		if err != nil || len(keys) != 2 || keys[0].RevokedAt != nil {
			t.Fatalf("DeviceKeys = %+v, %v", keys, err)
		}
		if _, err := s.DeviceKeys(ctx, tenantB, a.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeviceKeys of another tenant's agent: %v, want ErrNotFound", err)
		}
		for _, tt := range []struct{ name, tenant, agent, kid string }{
			{"another tenant", tenantB, a.UUID, creds.Kid},
			{"another agent", tenantB, foreign.UUID, creds.Kid},
			{"unknown kid", tenantA, a.UUID, "ZZZZZZZZ"},
			{"malformed agent", tenantA, "press", creds.Kid},
		} {
			if err := s.RevokeDeviceKey(ctx, tt.tenant, tt.agent, tt.kid); !errors.Is(err, ErrNotFound) {
				t.Errorf("RevokeDeviceKey, %s: %v, want ErrNotFound", tt.name, err)
			}
		}
		if err := s.RevokeDeviceKey(ctx, tenantA, a.UUID, creds.Kid); err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeDeviceKey(ctx, tenantA, a.UUID, creds.Kid); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoking twice: %v, want ErrNotFound", err)
		}
		if _, err := s.DeviceByKey(ctx, creds.APIKey); !errors.Is(err, ErrDeviceDenied) {
			t.Errorf("a revoked key: %v, want ErrDeviceDenied", err)
		}
		if _, err := s.DeviceByKey(ctx, second.APIKey); err != nil {
			t.Errorf("the agent's other key after a revocation: %v", err)
		}

		// Deleting the agent returns the kids that stopped working.
		if _, err := s.DeleteAgent(ctx, tenantB, a.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeleteAgent of another tenant's agent: %v, want ErrNotFound", err)
		}
		kids, err := s.DeleteAgent(ctx, tenantA, a.UUID)
		slices.Sort(kids)
		want := []string{creds.Kid, second.Kid}
		slices.Sort(want)
		if err != nil || !slices.Equal(kids, want) {
			t.Errorf("DeleteAgent = %v, %v; want %v", kids, err, want)
		}
		if _, err := s.DeviceByKey(ctx, second.APIKey); !errors.Is(err, ErrDeviceDenied) {
			t.Errorf("a deleted agent's key: %v, want ErrDeviceDenied", err)
		}
		if _, err := s.DeleteAgent(ctx, tenantA, a.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleting twice: %v, want ErrNotFound", err)
		}
	})
}

// withOtherLastChar returns s with its last character changed, for a key
// of the right form with the wrong secret.
func withOtherLastChar(s string) string {
	if strings.HasSuffix(s, "a") {
		return s[:len(s)-1] + "b"
	}
	return s[:len(s)-1] + "a"
}

func TestTargetStateIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		a := mustCreate(t, s, tenantA, NewAgent{Name: "press"})
		ts, err := s.TargetState(ctx, tenantA, a.UUID)
		if err != nil || ts.Version != 0 || string(ts.State) != "{}" {
			t.Errorf("a new agent's target state = %+v, %v", ts, err)
		}
		state := json.RawMessage(`{ "schemaVersion": 1, "endpoints": [ {"name": "plc", "protocol": "modbus"} ] }`)
		for _, tt := range []struct {
			name, tenant, agent string
			state               string
			want                error
		}{
			{"an array", tenantA, a.UUID, `[1]`, ErrInvalid},
			{"null", tenantA, a.UUID, `null`, ErrInvalid},
			{"not JSON", tenantA, a.UUID, `{`, ErrInvalid},
			{"not a document", tenantA, a.UUID, `{"apps":{}}`, ErrInvalid},
			{"a secret value", tenantA, a.UUID, `{"schemaVersion":1,"destinations":[{"name":"d","type":"mqtt","config_json":{"password":"pw"}}]}`, ErrInvalid},
			{"too large", tenantA, a.UUID, `{"x":"` + strings.Repeat("x", maxTargetState) + `"}`, ErrInvalid},
			{"another tenant's agent", tenantB, a.UUID, `{}`, ErrNotFound},
			{"unknown agent", tenantA, unknownID, `{}`, ErrNotFound},
		} {
			if _, err := s.SetTargetState(ctx, tt.tenant, tt.agent, json.RawMessage(tt.state), adminA, true); !errors.Is(err, tt.want) {
				t.Errorf("SetTargetState, %s: %v, want %v", tt.name, err, tt.want)
			}
		}
		ts, err = s.SetTargetState(ctx, tenantA, a.UUID, state, adminA, true)
		if err != nil || ts.Version != 1 || string(ts.State) != `{"schemaVersion":1,"endpoints":[{"name":"plc","protocol":"modbus"}]}` || ts.UpdatedBy != adminA {
			t.Fatalf("create = %+v (%s), %v", ts, ts.State, err)
		}
		if _, err := s.SetTargetState(ctx, tenantA, a.UUID, state, adminA, true); !errors.Is(err, ErrTargetStateExists) || !errors.Is(err, ErrConflict) {
			t.Errorf("creating twice: %v, want ErrTargetStateExists", err)
		}
		if ts, err = s.SetTargetState(ctx, tenantA, a.UUID, json.RawMessage(`{"schemaVersion":1,"endpoints":[]}`), adminA, false); err != nil || ts.Version != 2 {
			t.Errorf("replace = %+v, %v", ts, err)
		}
		if ts, err = s.ClearTargetState(ctx, tenantA, a.UUID, adminA); err != nil || ts.Version != 3 || string(ts.State) != "{}" {
			t.Errorf("clear = %+v, %v", ts, err)
		}
		got, err := s.TargetState(ctx, tenantA, a.UUID)
		if err != nil || got.Version != 3 || string(got.State) != "{}" || got.UpdatedAt.IsZero() {
			t.Errorf("stored = %+v, %v", got, err)
		}
		if _, err := s.TargetState(ctx, tenantB, a.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("another tenant's TargetState: %v, want ErrNotFound", err)
		}
		// Replacing where none exists starts at version 1.
		b := mustCreate(t, s, tenantA, NewAgent{Name: "lathe"})
		if ts, err := s.SetTargetState(ctx, tenantA, b.UUID, state, "", false); err != nil || ts.Version != 1 {
			t.Errorf("first replace = %+v, %v", ts, err)
		}
	})
}

// TestRegisterOneKeyOnceIntegration: of registrations racing with one key,
// exactly one wins.
func TestRegisterOneKeyOnceIntegration(t *testing.T) {
	s, _ := newTestStore(t, "postgres")
	ctx := t.Context()
	_, key, err := s.CreateProvisioningKey(ctx, tenantA, adminA, NewProvisioningKey{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, _, err := s.Register(context.Background(), Registration{Key: key, AgentName: "press " + string(rune('a'+i))}, nil)
			errs <- err
		}()
	}
	won := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			won++
		case !errors.Is(err, ErrKeyRefused):
			t.Errorf("a losing registration: %v, want ErrKeyRefused", err)
		}
	}
	if won != 1 {
		t.Errorf("%d registrations won with one key, want 1", won)
	}
	if n, err := s.CountAgents(ctx); err != nil || n != 1 {
		t.Errorf("%d agents, %v; want 1", n, err)
	}
}

// mustFleet creates a fleet of tenant with template (nil: {}).
func mustFleet(t *testing.T, s *Store, tenant, name string, template json.RawMessage) Fleet {
	t.Helper()
	f, err := s.CreateFleet(t.Context(), tenant, adminA, FleetInput{Name: &name, Template: template})
	if err != nil {
		t.Fatalf("create fleet %q: %v", name, err)
	}
	return f
}
