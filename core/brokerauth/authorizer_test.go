package brokerauth

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var deviceClientID = AgentClientID(agentUUID)

func TestAuthenticate(t *testing.T) {
	tests := []struct {
		name      string
		user      string
		pass      string
		clientID  string
		storeErr  error
		want      string // "" = allowed, else the deny reason
		superuser bool
	}{
		{name: "device", user: deviceKey, pass: devicePassword, clientID: deviceClientID},
		{name: "service user", user: serviceUser, pass: servicePassword, clientID: "edgeplat-api-host1", superuser: true},
		{name: "anonymous", user: "", pass: "", clientID: deviceClientID, want: ReasonAnonymous},
		{name: "anonymous with password", user: "", pass: devicePassword, clientID: deviceClientID, want: ReasonAnonymous},
		{name: "wrong password", user: deviceKey, pass: "guess", clientID: deviceClientID, want: ReasonBadCredentials},
		{name: "empty password", user: deviceKey, pass: "", clientID: deviceClientID, want: ReasonBadCredentials},
		{name: "unknown key", user: "dk_unknown", pass: devicePassword, clientID: deviceClientID, want: ReasonBadCredentials},
		{name: "other agent's client id", user: deviceKey, pass: devicePassword, clientID: AgentClientID(otherAgentUUID), want: ReasonBadClientID},
		{name: "free-form client id", user: deviceKey, pass: devicePassword, clientID: "my-device", want: ReasonBadClientID},
		{name: "uppercase client id", user: deviceKey, pass: devicePassword, clientID: "agent-" + strings.ToUpper(agentUUID), want: ReasonBadClientID},
		{name: "empty client id", user: deviceKey, pass: devicePassword, clientID: "", want: ReasonBadIdentifier},
		{name: "wildcard in username", user: "dk+", pass: devicePassword, clientID: deviceClientID, want: ReasonBadIdentifier},
		{name: "slash in username", user: "dk/1", pass: devicePassword, clientID: deviceClientID, want: ReasonBadIdentifier},
		{name: "dollar in client id", user: deviceKey, pass: devicePassword, clientID: "$agent", want: ReasonBadIdentifier},
		{name: "hash in client id", user: deviceKey, pass: devicePassword, clientID: "agent-#", want: ReasonBadIdentifier},
		{name: "control character in username", user: "dk\n1", pass: devicePassword, clientID: deviceClientID, want: ReasonBadIdentifier},
		{name: "service user wrong password", user: serviceUser, pass: "service-secreT", clientID: "api", want: ReasonBadCredentials},
		{name: "service user empty password", user: serviceUser, pass: "", clientID: "api", want: ReasonBadCredentials},
		{name: "store failure", user: deviceKey, pass: devicePassword, clientID: deviceClientID, storeErr: errStoreDown, want: ReasonStoreError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newMemStore()
			store.setErr(tt.storeErr)
			a, _, denies := newTestAuthorizer(t, store, nil)
			id, err := a.Authenticate(context.Background(), tt.user, tt.pass, tt.clientID)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Authenticate = %v, want allowed", err)
				}
				if id.Superuser != tt.superuser || id.Username != tt.user {
					t.Errorf("identity = %+v", id)
				}
				if !tt.superuser && (id.TenantUUID != tenantUUID || id.AgentUUID != agentUUID) {
					t.Errorf("identity = %+v, want tenant %s agent %s", id, tenantUUID, agentUUID)
				}
				if denies.count() != 0 {
					t.Errorf("deny events on an allowed connect: %+v", denies.events)
				}
				return
			}
			if err == nil {
				t.Fatalf("Authenticate allowed %+v, want %s", id, tt.want)
			}
			if id != (Identity{}) {
				t.Errorf("refused Authenticate returned identity %+v", id)
			}
			if (tt.storeErr == nil) != errors.Is(err, ErrDenied) {
				t.Errorf("errors.Is(%v, ErrDenied) = %v", err, errors.Is(err, ErrDenied))
			}
			if tt.storeErr != nil && !errors.Is(err, tt.storeErr) {
				t.Errorf("error %v does not wrap the store's", err)
			}
			ev, ok := denies.last()
			if !ok || ev.Reason != tt.want || ev.Check != CheckConnect {
				t.Fatalf("deny event = %+v, want connect/%s", ev, tt.want)
			}
			if tt.user != "" && (ev.UserFingerprint == "" || strings.Contains(ev.UserFingerprint, tt.user)) {
				t.Errorf("deny event fingerprint %q must identify the user without showing it", ev.UserFingerprint)
			}
		})
	}
}

// TestStoreIdentityIsChecked: what the store returns is trusted for tenant
// and agent only, normalised, and refused when it is not a pair of UUIDs.
func TestStoreIdentityIsChecked(t *testing.T) {
	store := newMemStore()
	store.add("dk_upper", "p", strings.ToUpper(tenantUUID), strings.ToUpper(agentUUID))
	store.add("dk_broken", "p", "not-a-uuid", agentUUID)
	store.devices["dk_super"] = memDevice{password: "p", id: Identity{TenantUUID: tenantUUID, AgentUUID: agentUUID, Superuser: true}}
	a, _, _ := newTestAuthorizer(t, store, nil)
	ctx := context.Background()

	id, err := a.Authenticate(ctx, "dk_upper", "p", deviceClientID)
	if err != nil || id.TenantUUID != tenantUUID || id.AgentUUID != agentUUID {
		t.Errorf("uppercase UUIDs from the store: %+v, %v; want canonical", id, err)
	}
	if _, err := a.Authenticate(ctx, "dk_broken", "p", deviceClientID); err == nil || errors.Is(err, ErrDenied) {
		t.Errorf("broken identity from the store: %v, want a store error", err)
	}
	id, err = a.Authenticate(ctx, "dk_super", "p", deviceClientID)
	if err != nil || id.Superuser || id.Username != "dk_super" {
		t.Errorf("store claiming superuser: %+v, %v; want a plain device", id, err)
	}
}

func TestStoreTimeoutDenies(t *testing.T) {
	store := newMemStore()
	store.gate = make(chan struct{}) // never opened: only the timeout ends the call
	a, _, denies := newTestAuthorizer(t, store, func(o *Options) { o.StoreTimeout = 20 * time.Millisecond })
	_, err := a.Authenticate(context.Background(), deviceKey, devicePassword, deviceClientID)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Authenticate = %v, want a refusal caused by the deadline", err)
	}
	if ev, _ := denies.last(); ev.Reason != ReasonStoreError {
		t.Errorf("deny reason = %q, want %q", ev.Reason, ReasonStoreError)
	}
}

func TestCanceledContextDenies(t *testing.T) {
	store := newMemStore()
	store.gate = make(chan struct{})
	a, _, _ := newTestAuthorizer(t, store, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); err == nil {
		t.Fatal("Authenticate with a canceled context allowed the client")
	}
}

func TestCacheAndTTL(t *testing.T) {
	store := newMemStore()
	a, clk, _ := newTestAuthorizer(t, store, func(o *Options) { o.CacheTTL = time.Minute })
	ctx := context.Background()
	auth := func(pass string) error {
		_, err := a.Authenticate(ctx, deviceKey, pass, deviceClientID)
		return err
	}

	if err := auth(devicePassword); err != nil {
		t.Fatal(err)
	}
	if err := auth(devicePassword); err != nil {
		t.Fatal(err)
	}
	if n := store.callCount(); n != 1 {
		t.Fatalf("store calls = %d after two connects within the TTL, want 1", n)
	}
	// A wrong password is its own cache entry: never answered by the
	// right one's, and cached as a refusal.
	if err := auth("guess"); !errors.Is(err, ErrDenied) {
		t.Fatalf("wrong password = %v", err)
	}
	if err := auth("guess"); !errors.Is(err, ErrDenied) {
		t.Fatalf("wrong password again = %v", err)
	}
	if n := store.callCount(); n != 2 {
		t.Fatalf("store calls = %d, want 2 (the wrong password's refusal is cached)", n)
	}
	// The right password still passes from the cache after the refusal.
	if err := auth(devicePassword); err != nil {
		t.Fatal(err)
	}
	if n := store.callCount(); n != 2 {
		t.Fatalf("store calls = %d, want 2", n)
	}

	clk.Add(time.Minute)
	if err := auth(devicePassword); err != nil {
		t.Fatal(err)
	}
	if n := store.callCount(); n != 3 {
		t.Fatalf("store calls = %d after the TTL passed, want 3", n)
	}

	// A change in the store shows once the TTL has passed.
	store.revoke(deviceKey)
	if err := auth(devicePassword); err != nil {
		t.Fatalf("within the TTL the cached answer stands: %v", err)
	}
	clk.Add(time.Minute)
	if err := auth(devicePassword); !errors.Is(err, ErrDenied) {
		t.Fatalf("after the TTL a key the store dropped = %v, want refused", err)
	}
}

func TestZeroTTLAsksTheStoreEveryTime(t *testing.T) {
	store := newMemStore()
	a, _, _ := newTestAuthorizer(t, store, func(o *Options) { o.CacheTTL = 0 })
	for i := 0; i < 3; i++ {
		if _, err := a.Authenticate(context.Background(), deviceKey, devicePassword, deviceClientID); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.callCount(); n != 3 {
		t.Fatalf("store calls = %d, want 3", n)
	}
	// The identity is still recorded for ACL callbacks.
	if !a.CheckACL(context.Background(), deviceKey, deviceClientID, topicOf(t, "i/{T}/a/{A}/state"), AccessWrite) {
		t.Error("ACL check after an uncached connect was refused")
	}
}

func TestStoreErrorsAreNotCached(t *testing.T) {
	store := newMemStore()
	store.setErr(errStoreDown)
	a, _, _ := newTestAuthorizer(t, store, nil)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); err == nil {
		t.Fatal("store failure allowed the client")
	}
	store.setErr(nil)
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); err != nil {
		t.Fatalf("after the store recovered: %v", err)
	}
}

func TestInvalidateDeniesNewConnectsAtOnce(t *testing.T) {
	store := newMemStore()
	a, _, denies := newTestAuthorizer(t, store, nil)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); err != nil {
		t.Fatal(err)
	}
	// The account store revokes the key: it deletes it and invalidates.
	store.revoke(deviceKey)
	a.Invalidate(deviceKey)
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); !errors.Is(err, ErrDenied) {
		t.Fatalf("connect after Invalidate = %v, want refused", err)
	}
	if a.CheckACL(ctx, deviceKey, deviceClientID, topicOf(t, "i/{T}/a/{A}/state"), AccessWrite) {
		t.Error("ACL check for a revoked key allowed")
	}
	if ev, _ := denies.last(); ev.Reason != ReasonUnknownSession {
		t.Errorf("deny reason = %q, want %q", ev.Reason, ReasonUnknownSession)
	}
}

// TestInvalidateDuringStoreCall: a store call that began before the key was
// revoked must neither allow the connect nor leave a cached allow behind.
func TestInvalidateDuringStoreCall(t *testing.T) {
	store := newMemStore()
	store.gate = make(chan struct{})
	store.entered = make(chan struct{}, 1)
	a, _, _ := newTestAuthorizer(t, store, nil)
	ctx := context.Background()

	errc := make(chan error, 1)
	go func() {
		_, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID)
		errc <- err
	}()
	<-store.entered
	a.Invalidate(deviceKey)
	close(store.gate) // the store answers with the identity it read before
	if err := <-errc; !errors.Is(err, ErrDenied) {
		t.Fatalf("connect racing the revocation = %v, want refused", err)
	}

	store.mu.Lock()
	store.gate, store.entered = nil, nil
	store.mu.Unlock()
	store.revoke(deviceKey)
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); !errors.Is(err, ErrDenied) {
		t.Fatalf("next connect = %v: a stale allow was cached", err)
	}
}

// TestWrongPasswordKeepsSession: a failed login with a device's key must
// not cut off the session the device already has.
func TestWrongPasswordKeepsSession(t *testing.T) {
	store := newMemStore()
	a, _, _ := newTestAuthorizer(t, store, nil)
	ctx := context.Background()
	topic := topicOf(t, "i/{T}/a/{A}/state")
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, deviceKey, "guess", deviceClientID); !errors.Is(err, ErrDenied) {
		t.Fatalf("wrong password = %v", err)
	}
	if !a.CheckACL(ctx, deviceKey, deviceClientID, topic, AccessWrite) {
		t.Error("the device's ACL checks fail after someone else's failed login")
	}
}

func TestCacheIsBounded(t *testing.T) {
	store := newMemStore()
	const max = 3
	a, _, _ := newTestAuthorizer(t, store, func(o *Options) { o.MaxCacheEntries = max })
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		for j := 0; j < 6; j++ { // more passwords than one user keeps
			_, _ = a.Authenticate(ctx, "dk_"+strings.Repeat("x", i+1), strings.Repeat("p", j+1), deviceClientID)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := a.results.len(); n != max {
		t.Errorf("result cache holds %d usernames, want %d", n, max)
	}
	for name, e := range a.results.byKey {
		if n := len(e.Value.(*userResults).items); n > perUserResults {
			t.Errorf("%s holds %d results, more than %d", name, n, perUserResults)
		}
	}
}

func TestIdentityTableIsBoundedLRU(t *testing.T) {
	store := newMemStore()
	agents := []string{agentUUID, otherAgentUUID, "2f3e4d5c-6b7a-4989-8a7b-6c5d4e3f2a1b", "3a4b5c6d-7e8f-4a0b-9c1d-2e3f4a5b6c7d"}
	for i, ag := range agents {
		store.add("dk_"+string(rune('a'+i)), "p", tenantUUID, ag)
	}
	a, _, _ := newTestAuthorizer(t, store, func(o *Options) { o.MaxCacheEntries = 3 })
	ctx := context.Background()
	for i, ag := range agents[:3] {
		if _, err := a.Authenticate(ctx, "dk_"+string(rune('a'+i)), "p", AgentClientID(ag)); err != nil {
			t.Fatal(err)
		}
	}
	// Touch dk_a so dk_b is the least recently used, then add a fourth.
	state := func(ag string) string {
		return "i/" + topicID(t, tenantUUID) + "/a/" + topicID(t, ag) + "/state"
	}
	if !a.CheckACL(ctx, "dk_a", AgentClientID(agents[0]), state(agents[0]), AccessWrite) {
		t.Fatal("dk_a refused")
	}
	if _, err := a.Authenticate(ctx, "dk_d", "p", AgentClientID(agents[3])); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	n := a.ids.len()
	a.mu.Unlock()
	if n != 3 {
		t.Errorf("identity table holds %d entries, want 3", n)
	}
	for i, want := range []bool{true, false, true, true} {
		user := "dk_" + string(rune('a'+i))
		if got := a.CheckACL(ctx, user, AgentClientID(agents[i]), state(agents[i]), AccessWrite); got != want {
			t.Errorf("CheckACL(%s) = %v, want %v", user, got, want)
		}
	}
}

func TestCheckACL(t *testing.T) {
	store := newMemStore()
	a, _, denies := newTestAuthorizer(t, store, nil)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		user     string
		clientID string
		topic    string
		acc      Access
		want     string
	}{
		{"publish own", deviceKey, deviceClientID, "i/{T}/a/{A}/endpoints/modbus", AccessWrite, ""},
		{"subscribe own commands", deviceKey, deviceClientID, "i/{T}/a/{A}/cmd/#", AccessSubscribe, ""},
		{"read own command", deviceKey, deviceClientID, "i/{T}/a/{A}/cmd/desired", AccessRead, ""},
		{"readwrite needs both", deviceKey, deviceClientID, "i/{T}/a/{A}/state", AccessRead | AccessWrite, ReasonNotCommand},
		{"publish other agent", deviceKey, deviceClientID, "i/{T}/a/{A2}/state", AccessWrite, ReasonForeignTopic},
		{"publish other tenant", deviceKey, deviceClientID, "i/{T2}/a/{A}/state", AccessWrite, ReasonForeignTopic},
		{"publish commands", deviceKey, deviceClientID, "i/{T}/a/{A}/cmd/jobs", AccessWrite, ReasonCommandTopic},
		{"subscribe everything", deviceKey, deviceClientID, "#", AccessSubscribe, ReasonForeignTopic},
		{"subscribe i/#", deviceKey, deviceClientID, "i/#", AccessSubscribe, ReasonForeignTopic},
		{"subscribe sys", deviceKey, deviceClientID, "$SYS/#", AccessSubscribe, ReasonForeignTopic},
		{"subscribe share", deviceKey, deviceClientID, "$share/g/i/{T}/a/{A}/cmd/#", AccessSubscribe, ReasonForeignTopic},
		{"other client id", deviceKey, AgentClientID(otherAgentUUID), "i/{T}/a/{A}/state", AccessWrite, ReasonBadClientID},
		{"never authenticated", "dk_other", deviceClientID, "i/{T}/a/{A}/state", AccessWrite, ReasonUnknownSession},
		{"anonymous", "", deviceClientID, "i/{T}/a/{A}/state", AccessWrite, ReasonBadIdentifier},
		{"access zero", deviceKey, deviceClientID, "i/{T}/a/{A}/state", 0, ReasonMalformed},
		{"access out of range", deviceKey, deviceClientID, "i/{T}/a/{A}/state", 8, ReasonMalformed},
		{"service user anything", serviceUser, "edgeplat-api", "i/{T}/a/{A}/cmd/desired", AccessWrite, ""},
		{"service user sys", serviceUser, "edgeplat-api", "$SYS/#", AccessSubscribe, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := denies.count()
			got := a.CheckACL(ctx, tt.user, tt.clientID, topicOf(t, tt.topic), tt.acc)
			if got != (tt.want == "") {
				t.Fatalf("CheckACL = %v, want reason %q", got, tt.want)
			}
			if tt.want == "" {
				if denies.count() != before {
					t.Error("an allowed check raised a deny event")
				}
				return
			}
			ev, _ := denies.last()
			if ev.Reason != tt.want {
				t.Errorf("deny reason = %q, want %q", ev.Reason, tt.want)
			}
		})
	}
}

func TestSuperuser(t *testing.T) {
	a, _, denies := newTestAuthorizer(t, newMemStore(), nil)
	ctx := context.Background()
	if !a.Superuser(ctx, serviceUser) {
		t.Error("service user is not a superuser")
	}
	for _, u := range []string{deviceKey, "", "EDGEPLAT-API"} {
		if a.Superuser(ctx, u) {
			t.Errorf("Superuser(%q) = true", u)
		}
	}
	if denies.count() != 0 {
		t.Error("a negative superuser answer raised deny events")
	}
}

func TestNewValidates(t *testing.T) {
	store := newMemStore()
	tests := []struct {
		name string
		opts Options
	}{
		{"no store", Options{}},
		{"service user without password", Options{Store: store, ServiceUsers: map[string]config.Secret{"api": ""}}},
		{"service user with a wildcard", Options{Store: store, ServiceUsers: map[string]config.Secret{"api/#": "x"}}},
		{"negative TTL", Options{Store: store, CacheTTL: -time.Second}},
		{"negative size", Options{Store: store, MaxCacheEntries: -1}},
	}
	for _, tt := range tests {
		if _, err := New(tt.opts); err == nil {
			t.Errorf("%s: New succeeded", tt.name)
		}
	}
}

func TestOptionsFromConfig(t *testing.T) {
	o := OptionsFromConfig(config.MQTT{Username: "api", Password: "pw", AuthCacheTTLSeconds: 300})
	if o.CacheTTL != 5*time.Minute || o.ServiceUsers["api"] != "pw" || len(o.ServiceUsers) != 1 {
		t.Errorf("OptionsFromConfig = %+v", o)
	}
	if o := OptionsFromConfig(config.MQTT{}); o.ServiceUsers != nil || o.CacheTTL != 0 {
		t.Errorf("OptionsFromConfig(empty) = %+v, want no service users", o)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, _, _ := newTestAuthorizer(t, newMemStore(), func(o *Options) { o.Registerer = reg })
	ctx := context.Background()
	_, _ = a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID)
	_, _ = a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID)
	_, _ = a.Authenticate(ctx, "", "", deviceClientID)
	_ = a.CheckACL(ctx, deviceKey, deviceClientID, "#", AccessSubscribe)

	decisions := a.metrics.decisions
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"connect", "allow", "device"}, 2},
		{[]string{"connect", "deny", ReasonAnonymous}, 1},
		{[]string{"subscribe", "deny", ReasonForeignTopic}, 1},
	} {
		if got := testutil.ToFloat64(decisions.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("decisions%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if got := testutil.ToFloat64(a.metrics.cacheHit); got != 1 {
		t.Errorf("cache hits = %v, want 1", got)
	}
	if _, err := New(Options{Store: newMemStore(), Registerer: reg}); err == nil {
		t.Error("a second Authorizer registered the same metrics")
	}
}

// TestConcurrentUse runs connects, ACL checks and invalidations together
// for the race detector.
func TestConcurrentUse(t *testing.T) {
	a, _, _ := newTestAuthorizer(t, newMemStore(), nil)
	ctx := context.Background()
	topic := topicOf(t, "i/{T}/a/{A}/state")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				switch (i + j) % 3 {
				case 0:
					_, _ = a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID)
				case 1:
					_ = a.CheckACL(ctx, deviceKey, deviceClientID, topic, AccessWrite)
				default:
					a.Invalidate(deviceKey)
				}
			}
		}(i)
	}
	wg.Wait()
}

func TestClip(t *testing.T) {
	if got := clip("aé", 2); got != "a" {
		t.Errorf("clip split a UTF-8 sequence: %q", got)
	}
	if got := clip("abc", 5); got != "abc" {
		t.Errorf("clip = %q", got)
	}
}

func TestInvalidatePrefix(t *testing.T) {
	store := newMemStore()
	a, _, _ := newTestAuthorizer(t, store, nil)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); err != nil {
		t.Fatal(err)
	}
	store.revoke(deviceKey)
	// Another prefix leaves the cached answer alone...
	a.InvalidatePrefix(deviceKey + "x")
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); err != nil {
		t.Fatalf("an unrelated prefix dropped the cached answer: %v", err)
	}
	// ...the key's own prefix drops it.
	a.InvalidatePrefix(deviceKey[:len(deviceKey)/2])
	if _, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID); !errors.Is(err, ErrDenied) {
		t.Fatalf("connect after InvalidatePrefix = %v, want refused", err)
	}
	if a.CheckACL(ctx, deviceKey, deviceClientID, topicOf(t, "i/{T}/a/{A}/state"), AccessWrite) {
		t.Error("ACL check after InvalidatePrefix allowed")
	}
}

// TestInvalidateEndsOpenDeviceSessions: a session holds the identity it
// connected with; revoking the key takes every right from it at once.
func TestInvalidateEndsOpenDeviceSessions(t *testing.T) {
	store := newMemStore()
	a, _, _ := newTestAuthorizer(t, store, nil)
	ctx := context.Background()
	id, err := a.Authenticate(ctx, deviceKey, devicePassword, deviceClientID)
	if err != nil {
		t.Fatal(err)
	}
	own := topicOf(t, "i/{T}/a/{A}/state")
	if !a.Authorize(ctx, id, own, AccessWrite) {
		t.Fatal("the session may not publish on its own topic")
	}
	store.revoke(deviceKey)
	a.InvalidatePrefix(deviceKey[:6])
	if a.Authorize(ctx, id, own, AccessWrite) {
		t.Fatal("a session kept publishing after its key was revoked")
	}
}
