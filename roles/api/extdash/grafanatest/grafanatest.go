// Package grafanatest is a scripted stand-in for Grafana's HTTP API, for
// the tests of the external dashboards: Grafana cannot run where the
// tests run. It answers the four calls the extdash client makes with the
// shapes Grafana documents for them (Folder/Dashboard Search API: GET
// /api/search; Alerting provisioning HTTP API: GET
// /api/v1/provisioning/alert-rules, GET and PUT
// /api/v1/provisioning/alert-rules/:uid), checks the bearer token as
// Grafana does (401 {"message": ...}), answers a missing rule 404 with an
// empty body, and keeps what a PUT stores. It is not Grafana: it checks
// only what the client is expected to send.
package grafanatest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Rule UIDs of the seeded alert rules.
const (
	// RuleThreshold's condition C is a threshold expression "gt 80".
	RuleThreshold = "bdf1k2a3b4c5d6"
	// RuleClassic's condition B is a classic condition "lt 10".
	RuleClassic = "cdf2k2a3b4c5d7"
	// RuleRange's condition C is a range, which has two values.
	RuleRange = "edf3k2a3b4c5d8"
)

// Server is the scripted Grafana.
type Server struct {
	*httptest.Server
	token string

	mu    sync.Mutex
	rules map[string]map[string]any
	order []string
	// failWith, when set, is the status of every answer.
	failWith int
	requests []string
	headers  []http.Header
}

// New starts a scripted Grafana that accepts token, with two dashboards
// and a folder in its search and the three seeded rules.
func New(t testing.TB, token string) *Server {
	t.Helper()
	s := &Server{token: token, rules: map[string]map[string]any{}}
	for _, r := range []map[string]any{
		rule(RuleThreshold, "Boiler temperature high", "C", "threshold", "gt", []float64{80}),
		rule(RuleClassic, "Line pressure low", "B", "classic_conditions", "lt", []float64{10}),
		rule(RuleRange, "Motor speed out of band", "C", "threshold", "outside_range", []float64{900, 1600}),
	} {
		uid := r["uid"].(string)
		s.rules[uid] = r
		s.order = append(s.order, uid)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// FailWith makes every later answer status (0 goes back to normal).
func (s *Server) FailWith(status int) {
	s.mu.Lock()
	s.failWith = status
	s.mu.Unlock()
}

// Requests returns "METHOD path?query" of every request so far.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// LastHeader returns the headers of the last request.
func (s *Server) LastHeader() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.headers) == 0 {
		return nil
	}
	return s.headers[len(s.headers)-1]
}

// Rule returns the stored document of rule uid.
func (s *Server) Rule(uid string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rules[uid]
}

// rule is a ProvisionedAlertRule as the provisioning API documents it: a
// query A, a reduce B (unless the condition is a classic condition B) and
// the condition expression.
func rule(uid, title, cond, kind, op string, params []float64) map[string]any {
	data := []any{map[string]any{
		"refId": "A", "queryType": "", "relativeTimeRange": map[string]any{"from": 600, "to": 0}, "datasourceUid": "PBFA97CFB590B2093",
		"model": map[string]any{"refId": "A", "expr": "boiler_temperature_celsius", "intervalMs": 1000, "maxDataPoints": 43200},
	}}
	condModel := map[string]any{"refId": cond, "type": kind,
		"conditions": []any{map[string]any{"evaluator": map[string]any{"type": op, "params": params},
			"operator": map[string]any{"type": "and"}, "query": map[string]any{"params": []string{"A"}},
			"reducer": map[string]any{"type": "last", "params": []any{}}, "type": "query"}},
		"datasource": map[string]any{"type": "__expr__", "uid": "__expr__"}}
	if kind == "threshold" {
		condModel["expression"] = "B"
		data = append(data, map[string]any{"refId": "B", "queryType": "", "relativeTimeRange": map[string]any{"from": 0, "to": 0},
			"datasourceUid": "__expr__", "model": map[string]any{"refId": "B", "type": "reduce", "expression": "A", "reducer": "last"}})
	}
	data = append(data, map[string]any{"refId": cond, "queryType": "", "relativeTimeRange": map[string]any{"from": 0, "to": 0},
		"datasourceUid": "__expr__", "model": condModel})
	return map[string]any{
		"id": len(uid), "uid": uid, "orgID": 1, "folderUID": "plant-alerts", "ruleGroup": "boilers", "title": title,
		"condition": cond, "data": data, "updated": "2026-11-30T08:00:00Z", "noDataState": "NoData", "execErrState": "Error",
		"for": "5m", "annotations": map[string]string{"summary": title}, "labels": map[string]string{"site": "plant7"},
		"provenance": "", "isPaused": false, "notification_settings": nil,
	}
}

// searchHits are the dashboards and a folder, as GET /api/search answers
// (a folder is left out by type=dash-db).
var searchHits = []map[string]any{
	{"id": 163, "uid": "000000163", "title": "Plant 7", "url": "/dashboards/f/000000163/plant-7", "type": "dash-folder", "tags": []string{}, "isStarred": false},
	{"id": 1, "uid": "cIBgcSjkk", "title": "Production Overview", "url": "/d/cIBgcSjkk/production-overview", "type": "dash-db",
		"tags": []string{"prod"}, "isStarred": true, "folderUid": "000000163", "folderTitle": "Plant 7", "folderUrl": "/dashboards/f/000000163/plant-7"},
	{"id": 2, "uid": "aBcD1234", "title": "Boilers", "url": "/d/aBcD1234/boilers", "type": "dash-db", "tags": nil, "isStarred": false},
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
	s.headers = append(s.headers, r.Header.Clone())
	if s.failWith != 0 {
		writeJSON(w, s.failWith, map[string]string{"message": "scripted failure"})
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "invalid API key"})
		return
	}
	// Grafana may be served under a sub-path (root_url); so is this.
	path := r.URL.Path
	if i := strings.Index(path, "/api/"); i > 0 {
		path = path[i:]
	}
	const rules = "/api/v1/provisioning/alert-rules"
	switch {
	case r.Method == http.MethodGet && path == "/api/search":
		var out []map[string]any
		for _, h := range searchHits {
			if t := r.URL.Query().Get("type"); t == "" || t == h["type"] {
				out = append(out, h)
			}
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == http.MethodGet && path == rules:
		out := make([]any, 0, len(s.order))
		for _, uid := range s.order {
			out = append(out, s.rules[uid])
		}
		writeJSON(w, http.StatusOK, out)
	case strings.HasPrefix(path, rules+"/"):
		uid := strings.TrimPrefix(path, rules+"/")
		cur, ok := s.rules[uid]
		switch {
		case !ok && r.Method == http.MethodGet:
			w.WriteHeader(http.StatusNotFound)
		case !ok:
			writeJSON(w, http.StatusNotFound, map[string]string{"message": "rule not found"})
		case r.Method == http.MethodGet:
			writeJSON(w, http.StatusOK, cur)
		case r.Method == http.MethodPut:
			s.put(w, r, uid)
		default:
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"message": "method not allowed"})
		}
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not found"})
	}
}

// put stores a rule as the provisioning API does: the whole rule, its
// uid and title required, 400 {"message"} otherwise.
func (s *Server) put(w http.ResponseWriter, r *http.Request, uid string) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var doc map[string]any
	if err != nil || json.Unmarshal(raw, &doc) != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "bad request data"})
		return
	}
	if doc["uid"] != uid || doc["title"] == "" || doc["condition"] == "" || doc["data"] == nil || doc["folderUID"] == nil || doc["ruleGroup"] == nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "invalid alert rule: uid, title, condition, data, folderUID and ruleGroup are required"})
		return
	}
	doc["updated"] = time.Now().UTC().Format(time.RFC3339)
	// A rule written through the API is locked in Grafana's UI unless the
	// request disables provenance.
	doc["provenance"] = "api"
	if r.Header.Get("X-Disable-Provenance") != "" {
		doc["provenance"] = ""
	}
	s.rules[uid] = doc
	writeJSON(w, http.StatusOK, doc)
}
