package api

import (
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/retention"
)

// TestReadingsRetentionSetting: api.readings_retention is the age past
// which the role's readings maintenance removes raw readings; the default
// (30 days) keeps a reading of three days, 48h does not, 0 keeps all.
func TestReadingsRetentionSetting(t *testing.T) {
	def, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	if def.API.ReadingsRetention != retention.DefaultRetention {
		t.Fatalf("api.readings_retention defaults to %s, want %s", def.API.ReadingsRetention, retention.DefaultRetention)
	}
	for _, c := range []struct {
		retention time.Duration // -1: the default
		left      int
	}{{-1, 2}, {48 * time.Hour, 1}, {0, 2}} {
		now := time.Now().UTC()
		d := apitest.SeededDB(t, "sqlite", now, apitest.AgentA1)
		for _, at := range []time.Time{now.Add(-72 * time.Hour), now.Add(-time.Hour)} {
			apitest.Exec(t, d, `INSERT INTO readings (time, agent_uuid, metric_name, value, tenant_id) VALUES ($1, $2, 'boiler.temp', 1, $3)`,
				d.Dialect().TimeArg(at), apitest.AgentA1, apitest.TenantA)
		}
		_, _, _, svcs := roleServices(t, d, testLicence(t, 0), func(cfg *config.Config) {
			if c.retention >= 0 {
				cfg.API.ReadingsRetention = c.retention
			}
		})
		m := maintainerOf(t, svcs)
		if _, err := m.Maintain(t.Context()); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := d.SQL().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM readings`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != c.left {
			t.Errorf("retention %s: %d readings left of a 72 h and a 1 h old one, want %d", m.Retention(), n, c.left)
		}
	}
}

// maintainerOf returns the readings maintenance among the role's services.
func maintainerOf(t *testing.T, services []lifecycle.Service) *retention.Maintainer {
	t.Helper()
	for _, s := range services {
		if m, ok := s.(*retention.Maintainer); ok {
			return m
		}
	}
	t.Fatal("no readings maintenance among the role's services")
	return nil
}
