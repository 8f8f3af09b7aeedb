package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api/token"
)

// appsReport is a state report with n apps of one service each, whose
// environment holds envBytes bytes.
func appsReport(n, envBytes int) control.StateReport {
	r := control.StateReport{Timestamp: time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC).UnixMilli(), State: "RUNNING",
		Apps: &control.AppsState{Runtime: control.RuntimeState{Status: "connected", Version: "4.3.1"}}}
	for i := range n {
		r.Apps.Apps = append(r.Apps.Apps, control.AppState{AppID: i + 1, AppName: fmt.Sprintf("app%d", i+1), Services: []control.ServiceState{{
			ServiceName: "main", ImageName: "localhost/ticker:test", Target: "running", State: "running", Status: "Up 3 minutes",
			ContainerID: strings.Repeat("c", 64),
			Config:      control.ServiceConfig{Environment: map[string]string{"BLOB": strings.Repeat("x", envBytes)}},
		}}})
	}
	return r
}

// decodedReport is r as decodeReport sees it.
func decodedReport(t *testing.T, r control.StateReport) map[string]any {
	t.Helper()
	dec, err := codec.Decode(encode(t, r, codec.FormatJSON), codec.Limits{MaxDecodedSize: maxReportBytes})
	if err != nil {
		t.Fatal(err)
	}
	return dec.Value.(map[string]any)
}

func TestBoundApps(t *testing.T) {
	for _, tt := range []struct {
		name           string
		report         control.StateReport
		configs        bool // services keep their config
		apps, total    int  // apps kept; appsTotal (0: absent)
		configsOmitted bool
	}{
		{"small: as reported", appsReport(3, 100), true, 3, 0, false},
		{"large environments: configs go", appsReport(10, 10<<10), false, 10, 0, true},
		{"many apps: the first that fit", appsReport(500, 10), false, 0, 500, true},
		{"no apps section", control.StateReport{State: "RUNNING"}, false, 0, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := decodedReport(t, tt.report)
			if err := boundApps(obj); err != nil {
				t.Fatal(err)
			}
			b, err := codec.AppendJSON(nil, obj)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Apps *struct {
					control.AppsState
					ConfigsOmitted bool `json:"configsOmitted"`
					AppsTotal      int  `json:"appsTotal"`
				} `json:"apps"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if tt.report.Apps == nil {
				if got.Apps != nil {
					t.Fatalf("apps appeared: %s", b)
				}
				return
			}
			if size, _ := jsonSize(obj["apps"]); size > maxAppsBytes {
				t.Errorf("apps section %d bytes, over %d", size, maxAppsBytes)
			}
			if got.Apps.Runtime.Status != "connected" || got.Apps.ConfigsOmitted != tt.configsOmitted || got.Apps.AppsTotal != tt.total {
				t.Errorf("section = runtime %+v, configsOmitted %v, appsTotal %d", got.Apps.Runtime, got.Apps.ConfigsOmitted, got.Apps.AppsTotal)
			}
			if tt.total > 0 && (len(got.Apps.Apps) == 0 || len(got.Apps.Apps) >= tt.total) {
				t.Errorf("kept %d of %d apps, want some but not all", len(got.Apps.Apps), tt.total)
			} else if tt.total == 0 && len(got.Apps.Apps) != tt.apps {
				t.Errorf("kept %d apps, want %d", len(got.Apps.Apps), tt.apps)
			}
			for i, a := range got.Apps.Apps {
				if a.AppID != i+1 || len(a.Services) != 1 || a.Services[0].State != "running" || a.Services[0].ContainerID == "" {
					t.Fatalf("app %d = %+v", i, a)
				}
				if has := a.Services[0].Config.Environment != nil; has != tt.configs {
					t.Fatalf("app %d config kept = %v, want %v", i, has, tt.configs)
				}
			}
		})
	}
}

// TestReportAppsIntegration: the apps an agent reports come back on its
// current state, bounded, in whatever codec it used.
func TestReportAppsIntegration(t *testing.T) {
	for name, cfg := range reportDBs(t) {
		t.Run(name, func(t *testing.T) {
			d := openMigrated(t, cfg)
			rep := newReports(&rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry()}, d)
			tenant, agent := randomUUID(t), randomUUID(t)
			tenantKey, _ := codec.IDFromUUID(tenant)
			agentKey, _ := codec.IDFromUUID(agent)
			tokens := testTokens(t)
			e := httpx.NewEngine(httpx.EngineOptions{WriteError: WriteError})
			e.Group("/api/v1", claimsAuthenticator(tokens).require).GET("/agents/:uuid/current-state", rep.currentState)

			for _, tt := range []struct {
				name   string
				report control.StateReport
				format codec.Format
				check  func(control.AppsState, map[string]json.RawMessage) error
			}{
				{"as reported", appsReport(2, 50), codec.FormatMsgpackDeflate, func(a control.AppsState, _ map[string]json.RawMessage) error {
					if len(a.Apps) != 2 || a.Apps[1].AppName != "app2" || a.Apps[1].Services[0].Config.Environment["BLOB"] != strings.Repeat("x", 50) {
						return fmt.Errorf("apps %+v", a.Apps)
					}
					return nil
				}},
				{"bounded", appsReport(300, 100), codec.FormatMsgpackDeflate, func(a control.AppsState, raw map[string]json.RawMessage) error {
					if string(raw["appsTotal"]) != "300" || string(raw["configsOmitted"]) != "true" || len(a.Apps) == 0 || len(a.Apps) >= 300 {
						return fmt.Errorf("%d apps, appsTotal %s, configsOmitted %s", len(a.Apps), raw["appsTotal"], raw["configsOmitted"])
					}
					return nil
				}},
			} {
				tt.report.Timestamp = time.Now().UnixMilli()
				if err := rep.handle(context.Background(), mqttx.Message{Topic: "i/" + tenantKey + "/a/" + agentKey + "/state", Payload: encode(t, tt.report, tt.format)}); err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				req := httptest.NewRequest(http.MethodGet, "/api/v1/agents/"+agent+"/current-state", nil)
				req.Header.Set("Authorization", "Bearer "+sign(t, tokens, tenant, token.Access))
				w := httptest.NewRecorder()
				e.ServeHTTP(w, req)
				var body struct {
					State struct {
						Apps json.RawMessage `json:"apps"`
					} `json:"state"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &body); w.Code != http.StatusOK || err != nil {
					t.Fatalf("%s: current-state %d %v: %.300s", tt.name, w.Code, err, w.Body)
				}
				var apps control.AppsState
				var raw map[string]json.RawMessage
				if err := json.Unmarshal(body.State.Apps, &apps); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(body.State.Apps, &raw); err != nil {
					t.Fatal(err)
				}
				if apps.Runtime.Status != "connected" || apps.Runtime.Version != "4.3.1" {
					t.Errorf("%s: runtime %+v", tt.name, apps.Runtime)
				}
				if err := tt.check(apps, raw); err != nil {
					t.Errorf("%s: %v", tt.name, err)
				}
			}
		})
	}
}
