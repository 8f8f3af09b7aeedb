package brokerauth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/config"
	"github.com/gin-gonic/gin"
)

// call posts body to path from remote with the given headers and returns
// the status and the decoded answer.
func call(t *testing.T, h http.Handler, path, contentType, body, remote string, headers map[string]string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.RemoteAddr = remote
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s answered %d with a body that is not JSON: %q", path, rec.Code, rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q; EMQX needs application/json", ct)
	}
	return rec.Code, out
}

const loopback = "127.0.0.1:50000"

func jsonBody(t *testing.T, fields map[string]any) string {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func formBody(fields map[string]any) string {
	v := url.Values{}
	for k, x := range fields {
		switch x := x.(type) {
		case string:
			v.Set(k, x)
		case int:
			v.Set(k, strconv.Itoa(x))
		}
	}
	return v.Encode()
}

// TestMosquittoGoAuthContract drives the callbacks with
// mosquitto-go-auth's HTTP backend requests, in its JSON and form params
// modes: 2xx allows, 403 denies, and a JSON body carries ok.
func TestMosquittoGoAuthContract(t *testing.T) {
	a := newAuthorizer(t, newMemStore())
	e := newEngine(t, a, config.BrokerAuth{AllowedNetworks: "127.0.0.1/32"})
	own := agentTopic(t, tenantUUID, agentUUID, "endpoints/modbus")
	cmd := agentTopic(t, tenantUUID, agentUUID, "cmd/#")
	steps := []struct {
		name   string
		path   string
		fields map[string]any
		allow  bool
		super  bool
	}{
		{"device connects", PathUser, map[string]any{"username": deviceKey, "password": devicePassword, "clientid": deviceClientID}, true, false},
		{"wrong password", PathUser, map[string]any{"username": deviceKey, "password": "guess", "clientid": deviceClientID}, false, false},
		{"anonymous", PathUser, map[string]any{"username": "", "password": "", "clientid": deviceClientID}, false, false},
		{"wrong client id", PathUser, map[string]any{"username": deviceKey, "password": devicePassword, "clientid": "agent-" + otherAgentUUID}, false, false},
		{"service user connects", PathUser, map[string]any{"username": serviceUser, "password": servicePassword, "clientid": "api-1"}, true, true},
		{"device is no superuser", PathSuperuser, map[string]any{"username": deviceKey}, false, false},
		{"service user is superuser", PathSuperuser, map[string]any{"username": serviceUser}, true, true},
		{"publish own", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": own, "acc": 2}, true, false},
		{"subscribe own commands", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": cmd, "acc": 4}, true, false},
		{"read own command", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": agentTopic(t, tenantUUID, agentUUID, "cmd/desired"), "acc": 1}, true, false},
		{"publish other agent", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": agentTopic(t, tenantUUID, otherAgentUUID, "state"), "acc": 2}, false, false},
		{"publish other tenant", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": agentTopic(t, otherTenantUUID, agentUUID, "state"), "acc": 2}, false, false},
		{"subscribe i/#", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": "i/#", "acc": 4}, false, false},
		{"subscribe #", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": "#", "acc": 4}, false, false},
		{"readwrite own telemetry", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": own, "acc": 3}, false, false},
		{"unknown acc", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": own, "acc": 9}, false, false},
		{"no acc", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": own}, false, false},
		{"no topic", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "acc": 2}, false, false},
	}
	for _, mode := range []string{"json", "form"} {
		for _, s := range steps {
			t.Run(mode+"/"+s.name, func(t *testing.T) {
				ct, body := "application/json", jsonBody(t, s.fields)
				if mode == "form" {
					ct, body = "application/x-www-form-urlencoded", formBody(s.fields)
				}
				status, out := call(t, e, s.path, ct, body, loopback, nil)
				wantStatus := http.StatusForbidden
				if s.allow {
					wantStatus = http.StatusOK
				}
				if status != wantStatus {
					t.Fatalf("status = %d, want %d (%v)", status, wantStatus, out)
				}
				if out["ok"] != s.allow {
					t.Errorf("ok = %v, want %v (mosquitto-go-auth's json mode reads it)", out["ok"], s.allow)
				}
				if out["is_superuser"] != s.super {
					t.Errorf("is_superuser = %v, want %v", out["is_superuser"], s.super)
				}
			})
		}
	}
}

// TestEMQXContract drives the callbacks with EMQX 5's HTTP authenticator and
// authorizer requests: every answer is 200, and result says allow or deny.
func TestEMQXContract(t *testing.T) {
	a := newAuthorizer(t, newMemStore())
	e := newEngine(t, a, config.BrokerAuth{AllowedNetworks: "127.0.0.1/32"})
	own := agentTopic(t, tenantUUID, agentUUID, "state")
	steps := []struct {
		name   string
		path   string
		fields map[string]any
		allow  bool
		super  bool
	}{
		{"device connects", PathUser + "?style=emqx", map[string]any{"username": deviceKey, "password": devicePassword, "clientid": deviceClientID}, true, false},
		{"wrong password", PathUser + "?style=emqx", map[string]any{"username": deviceKey, "password": "x", "clientid": deviceClientID}, false, false},
		{"anonymous", PathUser + "?style=emqx", map[string]any{"username": "", "password": "", "clientid": deviceClientID}, false, false},
		{"service user is superuser", PathUser + "?style=emqx", map[string]any{"username": serviceUser, "password": servicePassword, "clientid": "api"}, true, true},
		{"publish own", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": own, "action": "publish"}, true, false},
		{"subscribe own commands", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": agentTopic(t, tenantUUID, agentUUID, "cmd/#"), "action": "subscribe"}, true, false},
		{"publish commands", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": agentTopic(t, tenantUUID, agentUUID, "cmd/x"), "action": "publish"}, false, false},
		{"subscribe other tenant", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": agentTopic(t, otherTenantUUID, agentUUID, "cmd/#"), "action": "subscribe"}, false, false},
		{"subscribe share", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": "$share/g/#", "action": "subscribe"}, false, false},
		{"unknown action", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": own, "action": "all"}, false, false},
		{"action and acc", PathACL, map[string]any{"username": deviceKey, "clientid": deviceClientID, "topic": own, "action": "publish", "acc": 2}, false, false},
	}
	for _, mode := range []string{"json", "form"} {
		for _, s := range steps {
			t.Run(mode+"/"+s.name, func(t *testing.T) {
				ct, body := "application/json", jsonBody(t, s.fields)
				if mode == "form" {
					ct, body = "application/x-www-form-urlencoded", formBody(s.fields)
				}
				status, out := call(t, e, s.path, ct, body, loopback, nil)
				if status != http.StatusOK {
					t.Fatalf("status = %d; EMQX treats anything but 200/204 as ignore", status)
				}
				want := "deny"
				if s.allow {
					want = "allow"
				}
				if out["result"] != want {
					t.Errorf("result = %v, want %s", out["result"], want)
				}
				if out["is_superuser"] != s.super {
					t.Errorf("is_superuser = %v, want %v", out["is_superuser"], s.super)
				}
			})
		}
	}
}

func TestMalformedRequestsAreDenied(t *testing.T) {
	a := newAuthorizer(t, newMemStore())
	e := newEngine(t, a, config.BrokerAuth{AllowedNetworks: "127.0.0.1/32"})
	valid := jsonBody(t, map[string]any{"username": deviceKey, "password": devicePassword, "clientid": deviceClientID})
	tests := []struct {
		name, path, ct, body string
		status               int
	}{
		{"not JSON", PathUser, "application/json", "{", http.StatusForbidden},
		{"not JSON, EMQX", PathUser + "?style=emqx", "application/json", "{", http.StatusOK},
		{"JSON array", PathUser, "application/json", "[]", http.StatusForbidden},
		{"username not a string", PathUser, "application/json", `{"username":1,"password":"p","clientid":"c"}`, http.StatusForbidden},
		{"acc not a number", PathACL, "application/json", `{"username":"u","clientid":"c","topic":"t","acc":true}`, http.StatusForbidden},
		{"field twice in a form", PathUser, "application/x-www-form-urlencoded", "username=" + deviceKey + "&username=x&password=" + devicePassword + "&clientid=" + deviceClientID, http.StatusForbidden},
		{"body too large", PathUser, "application/json", `{"username":"` + strings.Repeat("a", maxBody) + `"}`, http.StatusForbidden},
		// Keys match exactly: "Username" is not "username".
		{"key in another case", PathUser, "application/json", strings.Replace(valid, `"username"`, `"Username"`, 1), http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := call(t, e, tt.path, tt.ct, tt.body, loopback, nil)
			if status != tt.status || out["result"] != "deny" {
				t.Errorf("status %d, body %v; want %d and a deny", status, out, tt.status)
			}
		})
	}
	// And the valid body is allowed, so the cases above fail for their flaw.
	if status, out := call(t, e, PathUser, "application/json", valid, loopback, nil); status != http.StatusOK {
		t.Errorf("valid request: %d %v", status, out)
	}
}

func TestStoreFailureDenies(t *testing.T) {
	store := newMemStore()
	store.setErr(errors.New("database is down"))
	a := newAuthorizer(t, store)
	e := newEngine(t, a, config.BrokerAuth{AllowedNetworks: "127.0.0.1/32"})
	body := jsonBody(t, map[string]any{"username": deviceKey, "password": devicePassword, "clientid": deviceClientID})
	if status, out := call(t, e, PathUser, "application/json", body, loopback, nil); status != http.StatusForbidden || out["ok"] != false {
		t.Errorf("mosquitto-go-auth form: %d %v, want 403 deny", status, out)
	}
	if status, out := call(t, e, PathUser+"?style=emqx", "application/json", body, loopback, nil); status != http.StatusOK || out["result"] != "deny" {
		t.Errorf("EMQX form: %d %v, want 200 deny", status, out)
	}
}

func TestAccessControl(t *testing.T) {
	a := newAuthorizer(t, newMemStore())
	body := jsonBody(t, map[string]any{"username": serviceUser})
	tests := []struct {
		name    string
		cfg     config.BrokerAuth
		remote  string
		headers map[string]string
		allowed bool
	}{
		{"allowed network", config.BrokerAuth{AllowedNetworks: "10.0.0.0/8"}, "10.1.2.3:4000", nil, true},
		{"outside the networks", config.BrokerAuth{AllowedNetworks: "10.0.0.0/8"}, "192.0.2.1:4000", nil, false},
		{"no networks, no secret", config.BrokerAuth{}, "127.0.0.1:4000", nil, false},
		{"IPv6 loopback", config.BrokerAuth{AllowedNetworks: "::1/128"}, "[::1]:4000", nil, true},
		{"forwarded-for is not the peer", config.BrokerAuth{AllowedNetworks: "127.0.0.1/32"}, "192.0.2.1:4000", map[string]string{"X-Forwarded-For": "127.0.0.1"}, false},
		{"secret header", config.BrokerAuth{Secret: brokerSecret}, "192.0.2.1:4000", map[string]string{SecretHeader: brokerSecret}, true},
		{"bearer", config.BrokerAuth{Secret: brokerSecret}, "192.0.2.1:4000", map[string]string{"Authorization": "Bearer " + brokerSecret}, true},
		{"bearer lowercase scheme", config.BrokerAuth{Secret: brokerSecret}, "192.0.2.1:4000", map[string]string{"Authorization": "bearer " + brokerSecret}, true},
		{"wrong secret", config.BrokerAuth{Secret: brokerSecret}, "192.0.2.1:4000", map[string]string{SecretHeader: "guess"}, false},
		{"wrong secret from an allowed network", config.BrokerAuth{Secret: brokerSecret, AllowedNetworks: "127.0.0.1/32"}, loopback, map[string]string{SecretHeader: "guess"}, false},
		{"no secret from an allowed network", config.BrokerAuth{Secret: brokerSecret, AllowedNetworks: "127.0.0.1/32"}, loopback, nil, true},
		{"proxied from an allowed network", config.BrokerAuth{AllowedNetworks: "127.0.0.1/32"}, loopback, map[string]string{"X-Forwarded-For": "203.0.113.5"}, false},
		{"proxied with the secret", config.BrokerAuth{Secret: brokerSecret, AllowedNetworks: "127.0.0.1/32"}, loopback,
			map[string]string{"X-Forwarded-For": "203.0.113.5", SecretHeader: string(brokerSecret)}, true},
		{"basic auth is no secret", config.BrokerAuth{Secret: brokerSecret}, "192.0.2.1:4000", map[string]string{"Authorization": "Basic " + brokerSecret}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, a, tt.cfg)
			for _, path := range []string{PathUser, PathSuperuser, PathACL} {
				status, out := call(t, e, path, "application/json", body, tt.remote, tt.headers)
				if !tt.allowed {
					errObj, _ := out["error"].(map[string]any)
					if status != http.StatusForbidden || errObj["code"] != "forbidden" {
						t.Errorf("%s: %d %v, want 403 with the error shape", path, status, out)
					}
					continue
				}
				if _, isErr := out["error"].(map[string]any); isErr {
					t.Errorf("%s: refused by the guard: %v", path, out)
				}
			}
		})
	}
}

func TestRegisterValidates(t *testing.T) {
	a := newAuthorizer(t, newMemStore())
	eng := gin.New()
	if err := Register(eng, a, config.BrokerAuth{AllowedNetworks: "not-a-cidr"}, writeError); err == nil {
		t.Error("Register accepted a malformed network list")
	}
	if err := Register(eng, nil, config.BrokerAuth{}, writeError); err == nil {
		t.Error("Register accepted a nil authorizer")
	}
}
