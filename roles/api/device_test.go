package api

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

func deviceCall(t *testing.T, e http.Handler, method, path, key string, body []byte, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	if key != "" {
		req.Header.Set("X-Device-API-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	return w
}

func TestDeviceRoutesIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _, pipe := fullRole(t, d, testLicence(t, 0))
		tok := admin(t, e)
		reg := func(name string) reply {
			r := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": provisioningKey(t, e, tok), "agentName": name})
			if r.status != http.StatusCreated {
				t.Fatalf("register: %d %s", r.status, r.raw)
			}
			return r
		}
		a, b := reg("a"), reg("b")
		key, agent := a.str("apiKey"), a.str("agentUuid")
		statePath := "/api/v1/device/" + agent + "/state"

		// Before any target state: version 0, the idle state.
		w := deviceCall(t, e, "GET", statePath, key, nil)
		if w.Code != http.StatusOK || w.Header().Get("ETag") != `"0"` || !strings.Contains(w.Body.String(), `"state":{}`) {
			t.Fatalf("initial state: %d %s %s", w.Code, w.Header().Get("ETag"), w.Body)
		}
		if r := call(t, e, "POST", "/api/v1/agents/"+agent+"/target-state", tok, map[string]any{"state": map[string]any{"schemaVersion": 1, "settings": map[string]any{"logging": map[string]any{"level": "debug"}}}}); r.status != http.StatusCreated {
			t.Fatalf("create target state: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/agents/"+agent+"/target-state", tok, map[string]any{"state": map[string]any{}}); r.status != http.StatusConflict {
			t.Fatalf("second create: %d %s", r.status, r.raw)
		}
		w = deviceCall(t, e, "GET", statePath, key, nil)
		etag := w.Header().Get("ETag")
		if w.Code != http.StatusOK || etag != `"1"` || !strings.Contains(w.Body.String(), `"level":"debug"`) {
			t.Fatalf("state: %d %s %s", w.Code, etag, w.Body)
		}
		if w := deviceCall(t, e, "GET", statePath, key, nil, "If-None-Match", etag); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
			t.Fatalf("If-None-Match with the current ETag: %d %s", w.Code, w.Body)
		}
		if r := call(t, e, "PUT", "/api/v1/agents/"+agent+"/target-state", tok, map[string]any{"state": map[string]any{"schemaVersion": 1, "endpoints": []any{}}}); r.status != http.StatusOK {
			t.Fatalf("replace target state: %d %s", r.status, r.raw)
		}
		if w := deviceCall(t, e, "GET", statePath, key, nil, "If-None-Match", etag); w.Code != http.StatusOK || w.Header().Get("ETag") != `"2"` {
			t.Fatalf("after a change: %d %s", w.Code, w.Header().Get("ETag"))
		}
		// Credentials.
		for _, tt := range []struct {
			name, path, key string
			want            int
		}{
			{"no key", statePath, "", http.StatusUnauthorized},
			{"wrong key", statePath, "dk2_AAAAAAAA_" + strings.Repeat("x", 40), http.StatusUnauthorized},
			{"a user token", statePath, tok, http.StatusUnauthorized},
			{"another agent's path", "/api/v1/device/" + b.str("agentUuid") + "/state", key, http.StatusForbidden},
		} {
			if w := deviceCall(t, e, "GET", tt.path, tt.key, nil); w.Code != tt.want {
				t.Errorf("%s: %d %s, want %d", tt.name, w.Code, w.Body, tt.want)
			}
		}

		// Log upload: gzip NDJSON into the tenant's logs stream.
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write([]byte(`{"level":"info","message":"started","timestamp":"2026-11-24T08:00:00Z","component":"agent"}` + "\n\n" +
			`{"level":"ERROR","message":"modbus timeout","timestamp":"2026-11-24T08:00:01Z","appId":"plc"}` + "\n"))
		zw.Close()
		logsPath := "/api/v1/device/" + agent + "/logs"
		if w := deviceCall(t, e, "POST", logsPath, key, gz.Bytes(), "Content-Encoding", "gzip"); w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), `"accepted":2`) {
			t.Fatalf("log upload: %d %s", w.Code, w.Body)
		}
		tu, _ := codec.ParseUUID(a.str("tenantId"))
		entries, err := pipe.streams.Range(t.Context(), telemetry.LogsStream(codec.EncodeID(tu)), "-", "+", 10)
		if err != nil || len(entries) != 1 {
			t.Fatalf("logs stream: %v %v", entries, err)
		}
		batch, err := telemetry.ParseLogBatch([]byte(entries[0].Values[telemetry.StreamField]))
		if err != nil || batch.AgentUUID != agent || len(batch.Logs) != 2 || batch.Logs[1].Level != "error" {
			t.Fatalf("stored batch: %+v %v", batch, err)
		}
		// A bad line refuses the whole upload and names the line.
		bad := []byte(`{"level":"info","message":"ok","timestamp":"2026-11-24T08:00:00Z"}` + "\n" + `{"level":"loud","message":"x","timestamp":"2026-11-24T08:00:00Z"}` + "\n")
		if w := deviceCall(t, e, "POST", logsPath, key, bad); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "loud") {
			t.Fatalf("bad level: %d %s", w.Code, w.Body)
		}
		if w := deviceCall(t, e, "POST", logsPath, key, []byte("not json\n")); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "line 1") {
			t.Fatalf("not json: %d %s", w.Code, w.Body)
		}
		if w := deviceCall(t, e, "POST", logsPath, key, bytes.Repeat([]byte("x"), 2<<20)); w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("oversized upload: %d", w.Code)
		}
		entries, _ = pipe.streams.Range(t.Context(), telemetry.LogsStream(codec.EncodeID(tu)), "-", "+", 10)
		if len(entries) != 1 {
			t.Fatalf("refused uploads appended %d entries", len(entries)-1)
		}
	})
}
