package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/streamstore"
	memstore "github.com/edgeplat/edgeplat/core/streamstore/memory"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/token"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

const testSecret = "test-secret-of-at-least-32-bytes!!"

func testTokens(t *testing.T) *token.Service {
	t.Helper()
	s, err := token.New(config.JWT{Secret: config.Secret(testSecret), AccessTokenExpiry: time.Minute, RefreshTokenExpiry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func randomUUID(t *testing.T) string {
	t.Helper()
	u, err := codec.DecodeID(randomID(t))
	if err != nil {
		t.Fatal(err)
	}
	return u.String()
}

func sign(t *testing.T, s *token.Service, tenantUUID string, kind token.Kind) string {
	t.Helper()
	raw, _, err := s.Sign(token.Claims{Subject: "user-1", Tenant: tenantUUID, Role: "member", Kind: kind, Family: "session-1"})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// restEngine is the /api/v1 part of New's engine, with the same middleware.
func restEngine(t *testing.T, tokens *token.Service, lv *live) *gin.Engine {
	t.Helper()
	e := httpx.NewEngine(httpx.EngineOptions{WriteError: WriteError, Metrics: prometheus.NewRegistry(), Server: "api"})
	v1 := e.Group("/api/v1", claimsAuthenticator(tokens).require)
	v1.GET("/whoami", func(c *gin.Context) {
		p, _ := principal(c)
		c.JSON(http.StatusOK, p)
	})
	if lv != nil {
		v1.GET("/agents/:uuid/stream", lv.stream)
	}
	return e
}

// claimsAuthenticator is an authenticator for tests of what follows
// authentication, without a database: the holder keeps the token's
// rights. The account check has its own tests
// (TestAccessTokenFollowsAccountIntegration).
func claimsAuthenticator(tokens *token.Service) *authenticator {
	return &authenticator{tokens: tokens, log: slog.New(slog.DiscardHandler),
		standing: func(_ context.Context, c token.Claims) (accounts.Standing, error) {
			return accounts.Standing{UserID: c.Subject, TenantUUID: c.Tenant, Role: c.Role}, nil
		}}
}

type apiError struct {
	Error struct{ Code, Message string } `json:"error"`
}

func TestAuthRequire(t *testing.T) {
	tokens := testTokens(t)
	tenant := randomUUID(t)
	other, err := token.New(config.JWT{Secret: config.Secret(strings.Repeat("z", 32)), AccessTokenExpiry: time.Minute, RefreshTokenExpiry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	badTenant, _, err := tokens.Sign(token.Claims{Subject: "u", Tenant: "not-a-uuid", Kind: token.Access, Family: "session-1"})
	if err != nil {
		t.Fatal(err)
	}
	noSession, _, err := tokens.Sign(token.Claims{Subject: "u", Tenant: tenant, Kind: token.Access})
	if err != nil {
		t.Fatal(err)
	}
	operator, _, err := tokens.Sign(token.Claims{Subject: "user-1", Tenant: tenant, Role: "admin", Kind: token.Access, Operator: true})
	if err != nil {
		t.Fatal(err)
	}
	operatorBadRole, _, err := tokens.Sign(token.Claims{Subject: "edgeplat-cli", Tenant: tenant, Role: "root", Kind: token.Access, Operator: true})
	if err != nil {
		t.Fatal(err)
	}
	e := restEngine(t, tokens, nil)
	for _, tt := range []struct {
		name   string
		header string
		status int
	}{
		{"operator token", "Bearer " + operator, http.StatusOK},
		{"operator token with an unknown role", "Bearer " + operatorBadRole, http.StatusUnauthorized},
		{"no header", "", http.StatusUnauthorized},
		{"basic scheme", "Basic dXNlcjpwYXNz", http.StatusUnauthorized},
		{"empty bearer", "Bearer ", http.StatusUnauthorized},
		{"refresh token", "Bearer " + sign(t, tokens, tenant, token.Refresh), http.StatusUnauthorized},
		{"another key", "Bearer " + sign(t, other, tenant, token.Access), http.StatusUnauthorized},
		{"tenant not a uuid", "Bearer " + badTenant, http.StatusUnauthorized},
		{"no session", "Bearer " + noSession, http.StatusUnauthorized},
		{"access token", "Bearer " + sign(t, tokens, tenant, token.Access), http.StatusOK},
		{"scheme in lower case", "bearer " + sign(t, tokens, tenant, token.Access), http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/api/v1/whoami", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			w := httptest.NewRecorder()
			e.ServeHTTP(w, req)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if tt.status == http.StatusOK {
				var p Principal
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
					t.Fatal(err)
				}
				key, _ := codec.IDFromUUID(tenant)
				if p.TenantUUID != tenant || p.TenantKey != key || p.UserID != "user-1" {
					t.Errorf("principal %+v", p)
				}
				return
			}
			var body apiError
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Code != "unauthorized" || body.Error.Message == "" {
				t.Errorf("body %s (%v), want the error shape with code unauthorized", w.Body, err)
			}
			if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

// sseReader reads events from a live stream.
type sseReader struct {
	t    *testing.T
	resp *http.Response
	r    *bufio.Reader
}

func openStream(t *testing.T, url, bearerToken string) *sseReader {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &sseReader{t: t, resp: resp, r: bufio.NewReader(resp.Body)}
	// The first block is the ": connected" comment, written after the
	// subscription is in place: anything published from now on arrives.
	if ev, data := s.next(); ev != "" || data != "" {
		t.Fatalf("first block is event %q %q, want the connected comment", ev, data)
	}
	return s
}

// next returns the next block's event name and data; comments give "".
func (s *sseReader) next() (event, data string) {
	s.t.Helper()
	var lines []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("read stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			break
		}
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			lines = append(lines, strings.TrimPrefix(line, "data: "))
		}
	}
	return event, strings.Join(lines, "\n")
}

// nextEvent skips comments (keepalives).
func (s *sseReader) nextEvent() (string, string) {
	for {
		if ev, data := s.next(); ev != "" {
			return ev, data
		}
	}
}

func liveStores(t *testing.T) map[string]streamstore.Store {
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	stores := map[string]streamstore.Store{"memory": mem}
	if !testing.Short() {
		rs, err := redisstore.New(redisstore.Options{Addrs: []string{coretest.RedisAddr(t)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		stores["redis"] = rs
	}
	return stores
}

// TestLiveStream: a dashboard's stream carries exactly its tenant's agent's
// values, in order; another tenant asking for the same agent uuid sees
// none of them; stopping the service ends open streams.
func TestLiveStream(t *testing.T) {
	for name, store := range liveStores(t) {
		t.Run(name, func(t *testing.T) {
			tokens := testTokens(t)
			lv := newLive(store, 10, prometheus.NewRegistry())
			srv := httptest.NewServer(restEngine(t, tokens, lv))
			defer srv.Close()

			tenantA, tenantB, agent := randomUUID(t), randomUUID(t), randomUUID(t)
			keyA, _ := codec.IDFromUUID(tenantA)
			keyB, _ := codec.IDFromUUID(tenantB)
			url := srv.URL + "/api/v1/agents/" + strings.ToUpper(agent) + "/stream"
			a := openStream(t, url, sign(t, tokens, tenantA, token.Access))
			b := openStream(t, url, sign(t, tokens, tenantB, token.Access))

			ctx := context.Background()
			publish := func(tenantKey, payload string) {
				t.Helper()
				stream := telemetry.IngestionStream(tenantKey)
				defer store.Delete(ctx, stream)
				_, err := store.Produce(ctx, streamstore.ProduceRequest{Stream: stream,
					Entries: []map[string]string{{"data": "{}"}}, Channel: telemetry.MetricsChannel(tenantKey, agent), Payload: []byte(payload)})
				if err != nil {
					t.Fatal(err)
				}
			}
			publish(keyA, `[{"seq":1}]`)
			publish(keyA, "[{\"seq\":2}]\n")
			publish(keyB, `[{"seq":"b"}]`)
			for _, want := range []string{`[{"seq":1}]`, "[{\"seq\":2}]\n"} {
				if ev, data := a.nextEvent(); ev != "metrics" || data != want {
					t.Fatalf("tenant A got %q %q, want metrics %q", ev, data, want)
				}
			}
			// B's first event is its own: A's two never reached it.
			if ev, data := b.nextEvent(); ev != "metrics" || data != `[{"seq":"b"}]` {
				t.Fatalf("tenant B got %q %q", ev, data)
			}

			if err := lv.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			for _, s := range []*sseReader{a, b} {
				if _, err := io.ReadAll(s.r); err != nil {
					t.Fatalf("stream did not end cleanly after Stop: %v", err)
				}
			}
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer "+sign(t, tokens, tenantA, token.Access))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("stream after Stop: %d, want 503", resp.StatusCode)
			}
		})
	}
}

func TestLiveStreamRefusals(t *testing.T) {
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	tokens := testTokens(t)
	lv := newLive(mem, 1, prometheus.NewRegistry())
	srv := httptest.NewServer(restEngine(t, tokens, lv))
	defer srv.Close()
	defer lv.Stop(context.Background())
	bearerToken := sign(t, tokens, randomUUID(t), token.Access)
	get := func(path string) (int, apiError) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+bearerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body apiError
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	for _, bad := range []string{"nope", "0123456789abcdef0123456789abcdef", "{00000000-0000-0000-0000-000000000000}"} {
		if code, body := get("/api/v1/agents/" + bad + "/stream"); code != http.StatusBadRequest || body.Error.Code != "invalid_parameter" || !strings.Contains(body.Error.Message, "uuid") {
			t.Errorf("uuid %q: %d %+v", bad, code, body)
		}
	}
	agent := randomUUID(t)
	_ = openStream(t, srv.URL+"/api/v1/agents/"+agent+"/stream", bearerToken)
	if code, body := get("/api/v1/agents/" + agent + "/stream"); code != http.StatusServiceUnavailable || body.Error.Code != "too_many_streams" {
		t.Errorf("stream past the limit: %d %+v", code, body)
	}
}

// TestLiveStreamSlowReaderReleased: a client that stops reading loses its
// stream once a write has waited writeTimeout, so it holds no slot.
func TestLiveStreamSlowReaderReleased(t *testing.T) {
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	tokens := testTokens(t)
	lv := newLive(mem, 1, prometheus.NewRegistry())
	lv.writeTimeout = 200 * time.Millisecond
	srv := httptest.NewServer(restEngine(t, tokens, lv))
	defer srv.Close()
	defer lv.Stop(context.Background())

	tenant, agent := randomUUID(t), randomUUID(t)
	key, _ := codec.IDFromUUID(tenant)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/v1/agents/%s/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", agent, sign(t, tokens, tenant, token.Access))
	coretest.Eventually(t, 5*time.Second, "the stream to open", func() bool { return lv.openStreams() == 1 })

	// Never read; publish far more than the socket buffers hold.
	payload := []byte(`["` + strings.Repeat("x", 64<<10) + `"]`)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for lv.openStreams() == 1 && time.Now().Before(deadline) {
		if _, err := mem.Produce(ctx, streamstore.ProduceRequest{Stream: telemetry.IngestionStream(key),
			Entries: []map[string]string{{"data": "{}"}}, Channel: telemetry.MetricsChannel(key, agent), Payload: payload}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if n := lv.openStreams(); n != 0 {
		t.Fatalf("%d streams still open for a client that reads nothing", n)
	}
}

// TestLiveStreamEndsWithToken: a stream ends, with an expired event, when
// the access token that opened it expires.
// TestLiveStreamEndsWithSession: a stream whose session ends (logout,
// deactivation...) ends at the next heartbeat, not at the token's expiry.
func TestLiveStreamEndsWithSession(t *testing.T) {
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	tokens := testTokens(t)
	var ended atomic.Bool
	auth := claimsAuthenticator(tokens)
	auth.standing = func(_ context.Context, c token.Claims) (accounts.Standing, error) {
		if ended.Load() {
			return accounts.Standing{}, accounts.ErrSessionEnded
		}
		return accounts.Standing{UserID: c.Subject, TenantUUID: c.Tenant, Role: c.Role}, nil
	}
	lv := newLive(mem, 10, prometheus.NewRegistry())
	lv.heartbeat = 10 * time.Millisecond
	e := httpx.NewEngine(httpx.EngineOptions{WriteError: WriteError, Metrics: prometheus.NewRegistry(), Server: "api"})
	e.GET("/api/v1/agents/:uuid/stream", auth.require, lv.stream)
	srv := httptest.NewServer(e)
	defer srv.Close()
	defer lv.Stop(context.Background())
	s := openStream(t, srv.URL+"/api/v1/agents/"+randomUUID(t)+"/stream", sign(t, tokens, randomUUID(t), token.Access))
	if ev, _ := s.next(); ev != "" {
		t.Fatalf("got event %q, want a keepalive while the session lives", ev)
	}
	ended.Store(true)
	if ev, data := s.nextEvent(); ev != "expired" || !strings.Contains(data, "session_ended") {
		t.Fatalf("got %q %q, want the expired event for the session", ev, data)
	}
	if _, err := io.ReadAll(s.r); err != nil {
		t.Fatalf("stream did not end after the expired event: %v", err)
	}
}

func TestLiveStreamEndsWithToken(t *testing.T) {
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	tokens, err := token.New(config.JWT{Secret: config.Secret(testSecret), AccessTokenExpiry: 2 * time.Second, RefreshTokenExpiry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	lv := newLive(mem, 10, prometheus.NewRegistry())
	srv := httptest.NewServer(restEngine(t, tokens, lv))
	defer srv.Close()
	defer lv.Stop(context.Background())
	s := openStream(t, srv.URL+"/api/v1/agents/"+randomUUID(t)+"/stream", sign(t, tokens, randomUUID(t), token.Access))
	if ev, data := s.nextEvent(); ev != "expired" || !strings.Contains(data, "token_expired") {
		t.Fatalf("got %q %q, want the expired event", ev, data)
	}
	if _, err := io.ReadAll(s.r); err != nil {
		t.Fatalf("stream did not end after the expired event: %v", err)
	}
}
