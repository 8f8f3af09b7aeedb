package broker

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// authTimeout bounds one connect check. mochi's hooks carry no context, and
// a store that hangs must refuse the client rather than hold its connection.
const authTimeout = 10 * time.Second

// authHook applies edgeplat's authentication and ACL rules inside mochi:
// OnConnectAuthenticate asks the Authorizer, and OnACLCheck applies the
// topic rules to the identity the client connected with.
//
// mochi calls OnACLCheck with write=true for a PUBLISH, and with
// write=false both for each SUBSCRIBE filter (wildcards included, before the
// subscription is stored) and for each message about to be delivered; a
// topic name is a filter without wildcards, so the subscribe rule decides
// both read cases.
type authHook struct {
	mqtt.HookBase
	auth *brokerauth.Authorizer

	mu sync.Mutex
	// sessions maps a client id to the client that authenticated with it
	// and its identity. An entry outlives the connection while the session
	// does (clean=false): mochi delivers to an offline persistent session
	// through the same ACL check. A new connect with the client id replaces
	// the entry, so the map holds at most one entry per client id.
	sessions map[string]session
}

type session struct {
	cl *mqtt.Client
	id brokerauth.Identity
}

func newAuthHook(a *brokerauth.Authorizer) *authHook {
	return &authHook{auth: a, sessions: make(map[string]session)}
}

// ID implements mqtt.Hook.
func (h *authHook) ID() string { return "edgeplat-auth" }

// Provides implements mqtt.Hook.
func (h *authHook) Provides(b byte) bool {
	return bytes.Contains([]byte{
		mqtt.OnConnectAuthenticate,
		mqtt.OnACLCheck,
		mqtt.OnDisconnect,
		mqtt.OnClientExpired,
	}, []byte{b})
}

// OnConnectAuthenticate implements mqtt.Hook. mochi has already set cl.ID
// from the CONNECT packet (or generated one for an empty id, which no
// device may use). A will message is a publish made on the client's behalf
// that mochi sends without an ACL check, so its topic is checked here.
func (h *authHook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	ctx, cancel := context.WithTimeout(context.Background(), authTimeout)
	defer cancel()
	id, err := h.auth.Authenticate(ctx, string(pk.Connect.Username), string(pk.Connect.Password), cl.ID)
	if err != nil {
		return false
	}
	if pk.Connect.WillFlag && !h.auth.Authorize(ctx, id, pk.Connect.WillTopic, brokerauth.AccessWrite) {
		return false
	}
	h.mu.Lock()
	h.sessions[cl.ID] = session{cl: cl, id: id}
	h.mu.Unlock()
	return true
}

// OnACLCheck implements mqtt.Hook.
func (h *authHook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	h.mu.Lock()
	s, ok := h.sessions[cl.ID]
	h.mu.Unlock()
	// Only the client object that authenticated: another one with the same
	// id is a connection whose own check has not succeeded (yet).
	if !ok || s.cl != cl {
		return false
	}
	acc := brokerauth.AccessSubscribe
	if write {
		acc = brokerauth.AccessWrite
	}
	return h.auth.Authorize(context.Background(), s.id, topic, acc)
}

// OnDisconnect implements mqtt.Hook: a session that ends with the
// connection forgets its identity.
func (h *authHook) OnDisconnect(cl *mqtt.Client, _ error, expire bool) {
	if expire {
		h.forget(cl)
	}
}

// OnClientExpired implements mqtt.Hook: a persistent session that expired.
func (h *authHook) OnClientExpired(cl *mqtt.Client) { h.forget(cl) }

func (h *authHook) forget(cl *mqtt.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// A client that was taken over has been replaced already; the entry is
	// its successor's.
	if s, ok := h.sessions[cl.ID]; ok && s.cl == cl {
		delete(h.sessions, cl.ID)
	}
}

var _ mqtt.Hook = (*authHook)(nil)
