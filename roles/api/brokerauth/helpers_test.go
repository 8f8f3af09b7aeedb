package brokerauth

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	bauth "github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/gin-gonic/gin"
)

const (
	tenantUUID      = "6f1c2a9e-3b7d-4c8a-9e21-0a1b2c3d4e5f"
	agentUUID       = "0d5e7f10-2a3b-4c5d-8e9f-a0b1c2d3e4f5"
	otherAgentUUID  = "1e2d3c4b-5a69-4788-9a0b-1c2d3e4f5a6b"
	otherTenantUUID = "9a8b7c6d-5e4f-4321-8fed-cba987654321"
	deviceKey       = "dk_live_7Qm2xZ"
	devicePassword  = "mqtt-pass-1"
	serviceUser     = "edgeplat-api"
	servicePassword = "service-secret"
	brokerSecret    = "callback-secret"
)

var deviceClientID = bauth.AgentClientID(agentUUID)

func topicID(t testing.TB, uuid string) string {
	t.Helper()
	id, err := codec.IDFromUUID(uuid)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// agentTopic returns i/{tenant}/a/{agent}/suffix in topic form.
func agentTopic(t testing.TB, tenant, agent, suffix string) string {
	return "i/" + topicID(t, tenant) + "/a/" + topicID(t, agent) + "/" + suffix
}

// memStore is an in-memory bauth.Store.
type memStore struct {
	mu      sync.Mutex
	devices map[string]memDevice
	err     error
}

type memDevice struct {
	password string
	id       bauth.Identity
}

func newMemStore() *memStore {
	return &memStore{devices: map[string]memDevice{
		deviceKey: {password: devicePassword, id: bauth.Identity{Username: deviceKey, TenantUUID: tenantUUID, AgentUUID: agentUUID}},
	}}
}

func (s *memStore) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *memStore) AuthenticateDevice(_ context.Context, username, password string) (bauth.Identity, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return bauth.Identity{}, s.err
	}
	d, ok := s.devices[username]
	if !ok || d.password != password {
		return bauth.Identity{}, fmt.Errorf("device key: %w", bauth.ErrDenied)
	}
	return d.id, nil
}

func newAuthorizer(t testing.TB, store bauth.Store) *bauth.Authorizer {
	t.Helper()
	a, err := bauth.New(bauth.Options{
		Store:        store,
		ServiceUsers: map[string]config.Secret{serviceUser: servicePassword},
		CacheTTL:     time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// writeError is the test's error shape, standing in for the API's.
func writeError(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": message}})
}

// newEngine returns an engine with the callbacks registered under cfg.
func newEngine(t testing.TB, a *bauth.Authorizer, cfg config.BrokerAuth) *gin.Engine {
	t.Helper()
	e := httpx.NewEngine(httpx.EngineOptions{WriteError: writeError})
	if err := Register(e, a, cfg, writeError); err != nil {
		t.Fatal(err)
	}
	return e
}
