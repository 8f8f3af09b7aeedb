package api

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	eventlog "github.com/edgeplat/edgeplat/roles/api/events"
)

// TestEventsRetentionSetting: api.events_retention is the age past which
// the role's event-log pruner deletes audit records; the default (90
// days) keeps a record of three days.
func TestEventsRetentionSetting(t *testing.T) {
	def, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	if def.API.EventsRetention != eventlog.DefaultRetention {
		t.Fatalf("api.events_retention defaults to %s, want %s", def.API.EventsRetention, eventlog.DefaultRetention)
	}
	for _, c := range []struct {
		retention time.Duration
		left      int
	}{{0, 2}, {48 * time.Hour, 1}} {
		now := time.Now().UTC()
		d := apitest.SeededDB(t, "sqlite", now)
		store := accounts.NewStore(d)
		for _, at := range []time.Time{now.Add(-72 * time.Hour), now.Add(-time.Hour)} {
			if err := store.Record(t.Context(), accounts.Event{Tenant: apitest.TenantA, At: at, Kind: "agent.status"}); err != nil {
				t.Fatal(err)
			}
		}
		_, _, _, svcs := roleServices(t, d, testLicence(t, 0), func(cfg *config.Config) {
			if c.retention != 0 {
				cfg.API.EventsRetention = c.retention
			}
		})
		p := prunerOf(t, svcs)
		if _, err := p.Prune(t.Context()); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := d.SQL().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM audit_events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != c.left {
			t.Errorf("retention %s: %d audit records left of a 72 h and a 1 h old one, want %d", c.retention, n, c.left)
		}
	}
}

// prunerOf returns the event-log pruner among the role's services.
func prunerOf(t *testing.T, services []lifecycle.Service) *eventlog.Pruner {
	t.Helper()
	for _, s := range services {
		if p, ok := s.(*eventlog.Pruner); ok {
			return p
		}
	}
	t.Fatal("no event-log pruner among the role's services")
	return nil
}

// TestStateReportSnapshotsIntegration: the report handler hands each
// stored state report to the event log, which keeps it only when what the
// agent reports changed; system-metrics reports are not state.
func TestStateReportSnapshotsIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		d := apitest.SeededDB(t, engine, time.Now(), apitest.AgentA1)
		r := &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry()}
		rep := newReports(r, d)
		rep.snapshot = eventlog.NewSnapshots(d, eventlog.NewMetrics(r.Metrics)).Record
		tu, _ := codec.ParseUUID(apitest.TenantA)
		au, _ := codec.ParseUUID(apitest.AgentA1)
		prefix := "i/" + codec.EncodeID(tu) + "/a/" + codec.EncodeID(au) + "/"
		t0 := time.Now().Add(-time.Hour)
		for i, runState := range []string{"running", "running", "stopped", "stopped"} {
			for _, kind := range []string{"state", "metrics"} {
				doc := encode(t, map[string]any{"timestamp": t0.Add(time.Duration(i) * time.Minute).UnixMilli(), "runState": runState,
					"endpoints": []any{map[string]any{"name": "plc1", "polls": i}}}, codec.FormatJSON)
				if err := rep.handle(context.Background(), mqttx.Message{Topic: prefix + kind, Payload: doc}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var n int
		if err := d.SQL().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM agent_state_snapshots WHERE agent_uuid = $1`, apitest.AgentA1).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("%d snapshots of four state reports with one change, want 2", n)
		}
	})
}
