package registry

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
)

// Documents of the fleet tests: the template holds the destination the
// member's own document subscribes to, so the own document is valid only
// merged.
const (
	fleetTemplate = `{"schemaVersion":1,"settings":{"logging":{"level":"info"}},"endpoints":[{"name":"plc","protocol":"modbus"}],` +
		`"destinations":[{"name":"cloud","type":"mqtt","config_json":{"password":{"secretRef":"broker"}}}]}`
	memberOwn = `{"schemaVersion":1,"settings":{"logging":{"level":"debug"}},"subscriptions":[{"destination":"cloud","topics":["#"]}]}`
)

// notices records what a store tells its observers.
type notices struct {
	mu      sync.Mutex
	changes []TargetStateChange
	events  []FleetEvent
}

func watch(s *Store) *notices {
	n := &notices{}
	s.OnTargetStateChange(func(ch TargetStateChange) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.changes = append(n.changes, ch)
	})
	s.OnFleetEvent(func(tenant string, ev FleetEvent) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if tenant == tenantA {
			n.events = append(n.events, ev)
		}
	})
	return n
}

// take returns the versions noticed per agent and the event kinds since
// the last call.
func (n *notices) take() (map[string]int64, []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	versions := map[string]int64{}
	for _, ch := range n.changes {
		versions[ch.State.AgentUUID] = ch.State.Version
	}
	var kinds []string
	for _, ev := range n.events {
		kinds = append(kinds, ev.Kind)
	}
	n.changes, n.events = nil, nil
	return versions, kinds
}

func effective(t *testing.T, s *Store, agent string) (control.TargetStateDoc, int64) {
	t.Helper()
	ts, _, err := s.EffectiveTargetState(t.Context(), tenantA, agent)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := control.ParseTargetState(ts.State)
	if err != nil {
		t.Fatalf("effective document %s: %v", ts.State, err)
	}
	return doc, ts.Version
}

func TestFleetsIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		seen := watch(s)
		f := mustFleet(t, s, tenantA, "north", json.RawMessage(fleetTemplate))
		if f.TemplateVersion != 1 || f.RunState != control.RunRunning || f.MemberCount != 0 {
			t.Errorf("created fleet %+v", f)
		}
		a := mustCreate(t, s, tenantA, NewAgent{Name: "press"})
		b := mustCreate(t, s, tenantA, NewAgent{Name: "lathe", Fleet: "north", By: adminA})
		foreign := mustCreate(t, s, tenantB, NewAgent{Name: "foreign"})
		if b.FleetID != f.ID || b.Fleet != "north" {
			t.Errorf("agent created in a fleet: %+v", b)
		}

		// Outside the fleet the own document must be whole; inside it is
		// a part, checked merged.
		if _, err := s.SetTargetState(ctx, tenantA, a.UUID, json.RawMessage(memberOwn), adminA, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("a part outside a fleet: %v, want ErrInvalid", err)
		}
		if _, err := s.AddFleetAgents(ctx, tenantA, f.ID, adminA, []string{a.UUID}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetTargetState(ctx, tenantA, a.UUID, json.RawMessage(memberOwn), adminA, false); err != nil {
			t.Fatalf("a member's part: %v", err)
		}
		bad := `{"schemaVersion":1,"subscriptions":[{"destination":"nowhere","topics":["#"]}]}`
		if _, err := s.SetTargetState(ctx, tenantA, a.UUID, json.RawMessage(bad), adminA, false); !errors.Is(err, ErrInvalid) ||
			!strings.Contains(err.Error(), `"nowhere"`) {
			t.Errorf("a member's part that breaks the merge: %v, want ErrInvalid naming the destination", err)
		}
		doc, v := effective(t, s, a.UUID)
		if v != 2 || len(doc.Endpoints) != 1 || len(doc.Subscriptions) != 1 || string(doc.Settings["logging"]) != `{"level":"debug"}` {
			t.Errorf("effective document at %d: %+v", v, doc)
		}
		// The agent receives the merged document with secrets resolved.
		if _, _, err := s.PutSecret(ctx, tenantA, "", "broker", "s3cret", adminA); err != nil {
			t.Fatal(err)
		}
		ts, tag, err := s.ResolvedTargetState(ctx, tenantA, a.UUID)
		if err != nil || tag == "" || !strings.Contains(string(ts.State), `"s3cret"`) || !strings.Contains(string(ts.State), `"plc"`) {
			t.Errorf("resolved = %s, %q, %v", ts.State, tag, err)
		}
		seen.take()

		// A template that would break a member is refused, naming it.
		breaking := `{"schemaVersion":1,"endpoints":[{"name":"plc","protocol":"modbus"}]}`
		if _, err := s.UpdateFleet(ctx, tenantA, f.ID, adminA, FleetInput{Template: json.RawMessage(breaking)}, false); !errors.Is(err, ErrInvalid) ||
			!strings.Contains(err.Error(), a.UUID) {
			t.Errorf("breaking template: %v, want ErrInvalid naming agent %s", err, a.UUID)
		}
		// Every change bumps every member, and each is noticed.
		versionOf := func(agent string) int64 {
			_, v := effective(t, s, agent)
			return v
		}
		for _, step := range []struct {
			name string
			do   func() error
			kind string
		}{
			{"template", func() error {
				_, err := s.UpdateFleet(ctx, tenantA, f.ID, adminA, FleetInput{Template: json.RawMessage(strings.Replace(fleetTemplate, "info", "warn", 1))}, false)
				return err
			}, FleetTemplateChanged},
			{"stop", func() error { _, err := s.SetFleetRunState(ctx, tenantA, f.ID, adminA, control.RunStopped); return err }, FleetStopped},
			{"start", func() error { _, err := s.SetFleetRunState(ctx, tenantA, f.ID, adminA, control.RunRunning); return err }, FleetStarted},
		} {
			va, vb := versionOf(a.UUID), versionOf(b.UUID)
			if err := step.do(); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			got, kinds := seen.take()
			if got[a.UUID] != va+1 || got[b.UUID] != vb+1 || versionOf(a.UUID) != va+1 || versionOf(b.UUID) != vb+1 {
				t.Errorf("%s: noticed %v, want %s at %d and %s at %d", step.name, got, a.UUID, va+1, b.UUID, vb+1)
			}
			if !slices.Equal(kinds, []string{step.kind}) {
				t.Errorf("%s: fleet events %v, want %s", step.name, kinds, step.kind)
			}
			if step.kind == FleetStopped {
				if doc, _ := effective(t, s, b.UUID); doc.RunState != control.RunStopped {
					t.Errorf("stopped fleet's member runs: %+v", doc)
				}
			}
		}
		if got, _ := s.Fleet(ctx, tenantA, f.ID); got.TemplateVersion != 2 || len(got.Members) != 2 || got.MemberCount != 2 {
			t.Errorf("fleet after the changes: %+v", got)
		}

		// A move between fleets: both get an event, the agent a version.
		south := mustFleet(t, s, tenantA, "south", nil)
		seen.take()
		vb := versionOf(b.UUID)
		if _, err := s.UpdateAgent(ctx, tenantA, b.UUID, AgentUpdate{Fleet: &south.ID, By: adminA}); err != nil {
			t.Fatal(err)
		}
		got, kinds := seen.take()
		if got[b.UUID] != vb+1 || !slices.Equal(kinds, []string{FleetAgentRemoved, FleetAgentAdded}) {
			t.Errorf("move: noticed %v, events %v", got, kinds)
		}
		if m, err := s.FleetMembers(ctx, tenantA, f.ID); err != nil || !slices.Equal(m, []string{a.UUID}) {
			t.Errorf("FleetMembers = %v, %v", m, err)
		}
		if _, err := s.FleetMembers(ctx, tenantB, f.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("another tenant's FleetMembers: %v, want ErrNotFound", err)
		}
		if _, err := s.AddFleetAgents(ctx, tenantA, f.ID, adminA, []string{foreign.UUID}); !errors.Is(err, ErrNotFound) {
			t.Errorf("adding another tenant's agent: %v, want ErrNotFound", err)
		}
		if err := s.RemoveFleetAgent(ctx, tenantA, f.ID, b.UUID, adminA); !errors.Is(err, ErrNotFound) {
			t.Errorf("removing a non-member: %v, want ErrNotFound", err)
		}
		if _, err := s.CreateFleet(ctx, tenantA, adminA, FleetInput{Name: &f.Name}); !errors.Is(err, ErrConflict) {
			t.Errorf("a second fleet named north: %v, want ErrConflict", err)
		}

		// Leaving the fleet would leave a's part alone: refused.
		if err := s.RemoveFleetAgent(ctx, tenantA, f.ID, a.UUID, adminA); !errors.Is(err, ErrInvalid) {
			t.Errorf("removing a member whose part needs the template: %v, want ErrInvalid", err)
		}
		// Delete: refused with members, forced takes them out first.
		if err := s.DeleteFleet(ctx, tenantA, f.ID, adminA, false); !errors.Is(err, ErrFleetHasMembers) {
			t.Errorf("delete with members: %v, want ErrFleetHasMembers", err)
		}
		va := versionOf(a.UUID)
		seen.take()
		if err := s.DeleteFleet(ctx, tenantA, f.ID, adminA, true); err != nil {
			t.Fatal(err)
		}
		got, kinds = seen.take()
		if got[a.UUID] != va+1 || !slices.Equal(kinds, []string{FleetAgentRemoved, FleetDeleted}) {
			t.Errorf("forced delete: noticed %v, events %v", got, kinds)
		}
		if ag, _ := s.Agent(ctx, tenantA, a.UUID); ag.FleetID != "" || ag.Fleet != "" {
			t.Errorf("agent after its fleet's delete: %+v", ag)
		}
		if _, err := s.Fleet(ctx, tenantA, f.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted fleet: %v", err)
		}
		evs, err := s.FleetEvents(ctx, tenantA, south.ID, 0)
		if err != nil || len(evs) != 2 || evs[0].Kind != FleetAgentAdded || evs[1].Kind != FleetCreated || evs[0].Actor != adminA {
			t.Errorf("south's events (newest first) = %+v, %v", evs, err)
		}
		if _, err := s.FleetEvents(ctx, tenantB, south.ID, 0); !errors.Is(err, ErrNotFound) {
			t.Errorf("another tenant's events: %v", err)
		}
	})
}

func TestFleetProvisioningIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		f := mustFleet(t, s, tenantA, "north", json.RawMessage(`{"schemaVersion":1,"endpoints":[{"name":"plc","protocol":"modbus"}]}`))
		k, plain, err := s.CreateProvisioningKey(ctx, tenantA, adminA, NewProvisioningKey{Fleet: f.ID})
		if err != nil || k.Fleet != "north" || k.FleetID != f.ID {
			t.Fatalf("key = %+v, %v", k, err)
		}
		creds, _, err := s.Register(ctx, Registration{Key: plain, AgentName: "press"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if creds.Agent.FleetID != f.ID {
			t.Errorf("registered agent %+v, want in fleet %s", creds.Agent, f.ID)
		}
		doc, v := effective(t, s, creds.Agent.UUID)
		if v != 1 || len(doc.Endpoints) != 1 {
			t.Errorf("first version %d: %+v, want the template", v, doc)
		}
		evs, err := s.FleetEvents(ctx, tenantA, f.ID, 1)
		if err != nil || len(evs) != 1 || evs[0].Kind != FleetAgentAdded || evs[0].Actor != KeyActor(k.ID) {
			t.Errorf("events = %+v, %v", evs, err)
		}
	})
}

// TestFleetMigrationIntegration checks that 0012_fleets turns the free
// text of agents.fleet and provisioning_keys.fleet into fleet records.
func TestFleetMigrationIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped in -short mode")
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			cfg := coretest.SQLite(t)
			if engine == "postgres" {
				cfg = coretest.Postgres(t)
			}
			ctx := t.Context()
			d, err := db.Open(ctx, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			dir := path.Join("migrations", engine)
			src := os.DirFS("../../../core/db")
			names, err := fs.Glob(src, dir+"/00*.sql")
			if err != nil {
				t.Fatal(err)
			}
			before := fstest.MapFS{}
			for _, n := range names {
				// The database as it was before fleets: every migration
				// numbered below 0012.
				if path.Base(n) < "0012_" {
					b, _ := fs.ReadFile(src, n)
					before[n] = &fstest.MapFile{Data: b}
				}
			}
			if _, err := d.MigrateFS(ctx, before, dir); err != nil {
				t.Fatal(err)
			}
			now := d.Dialect().TimeArg(time.Now())
			x := d.SQL()
			exec := func(q string, args ...any) {
				t.Helper()
				if _, err := x.ExecContext(ctx, q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			for _, tenant := range []string{tenantA, tenantB} {
				exec(`INSERT INTO tenants (uuid, name, created_at) VALUES ($1, $2, $3)`, tenant, tenant[:4], now)
			}
			agents := map[string][2]string{
				"11111111-0000-4000-8000-000000000001": {tenantA, "north"},
				"11111111-0000-4000-8000-000000000002": {tenantA, "north"},
				"11111111-0000-4000-8000-000000000003": {tenantA, ""},
				"11111111-0000-4000-8000-000000000004": {tenantB, "north"},
			}
			for id, af := range agents {
				exec(`INSERT INTO agents (uuid, tenant_uuid, name, fleet, created_at, updated_at) VALUES ($1, $2, 'a', $3, $4, $4)`, id, af[0], af[1], now)
			}
			exec(`INSERT INTO provisioning_keys (id, tenant_uuid, fleet, prefix, key_hash, created_at, expires_at) VALUES ($1, $2, 'south', 'p', 'h', $3, $4)`,
				unknownID, tenantA, now, d.Dialect().TimeArg(time.Now().Add(time.Hour)))
			if _, err := d.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			s := NewStore(d)
			fa, err := s.Fleets(ctx, tenantA)
			if err != nil || len(fa) != 2 || fa[0].Name != "north" || fa[0].MemberCount != 2 || fa[1].Name != "south" || fa[1].MemberCount != 0 {
				t.Errorf("tenant A's fleets = %+v, %v", fa, err)
			}
			fb, err := s.Fleets(ctx, tenantB)
			if err != nil || len(fb) != 1 || fb[0].MemberCount != 1 || fb[0].ID == fa[0].ID {
				t.Errorf("tenant B's fleets = %+v, %v", fb, err)
			}
			for id, af := range agents {
				a, err := s.Agent(ctx, af[0], id)
				if err != nil || a.Fleet != af[1] || (a.FleetID == "") != (af[1] == "") {
					t.Errorf("agent %s after the migration = %+v, %v", id, a, err)
				}
			}
			keys, err := s.ProvisioningKeys(ctx, tenantA)
			if err != nil || len(keys) != 1 || keys[0].Fleet != "south" || len(fa) < 2 || keys[0].FleetID != fa[1].ID {
				t.Errorf("keys after the migration = %+v, %v", keys, err)
			}
			if _, err := s.CreateFleet(ctx, tenantA, adminA, FleetInput{Name: &fa[0].Name}); !errors.Is(err, ErrConflict) {
				t.Errorf("a new fleet named like a migrated one: %v, want ErrConflict", err)
			}
		})
	}
}
