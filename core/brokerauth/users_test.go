package brokerauth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	brokerUser     = "scada-plant1"
	brokerPassword = "Zx8kQ2mNp4Rt6Vw8Yb0Cd2Ef4Gh6Jk8L"
)

// userRules are the broker user's rules in the tests.
var userRules = []Rule{
	{Pattern: "a/+/endpoints/#", Subscribe: true},
	{Pattern: "scada/setpoints/+", Publish: true},
	{Pattern: "bridge/#", Publish: true, Subscribe: true},
	{Pattern: "a/+/cmd/#", Publish: true, Subscribe: true},
}

func brokerUserID(rules ...Rule) Identity {
	return Identity{Username: brokerUser, TenantUUID: tenantUUID, ACL: &ACL{Rules: rules}}
}

// addBrokerUser puts a broker user into the memStore.
func addBrokerUser(s *memStore, name, password string, id Identity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id.Username = name
	s.devices[name] = memDevice{password: password, id: id}
}

// matches is the MQTT matching of a topic name against a filter, written
// from the specification (MQTT 5 section 4.7) independently of covers: '+' is one
// level, '#' its parent level and any number below.
func matches(filter, topic string) bool {
	fl := strings.Split(filter, "/")
	tl := strings.Split(topic, "/")
	for i, f := range fl {
		if f == "#" {
			return true
		}
		if i >= len(tl) || (f != "+" && f != tl[i]) {
			return false
		}
	}
	return len(fl) == len(tl)
}

func TestCovers(t *testing.T) {
	tests := []struct {
		pattern, filter string
		want            bool
	}{
		{"#", "a", true},
		{"#", "a/b/c", true},
		{"#", "#", true},
		{"#", "+/+", true},
		{"a/#", "a", true}, // '#' matches its parent level
		{"a/#", "a/#", true},
		{"a/#", "a/b/+/#", true},
		{"a/#", "b", false},
		{"a/#", "+", false},
		{"a/#", "#", false},
		{"a/+", "a/b", true},
		{"a/+", "a/+", true},
		{"a/+", "a/#", false}, // a/# also matches a and a/b/c
		{"a/+", "a", false},
		{"a/+", "a/b/c", false},
		{"a/+/#", "a/b", true},
		{"a/+/#", "a/+/c/#", true},
		{"a/+/#", "a", false},
		{"a/+/#", "a/#", false},
		{"a/b", "a/b", true},
		{"a/b", "a/+", false},
		{"a/b", "a/c", false},
		{"a/b", "a", false},
		{"a/b", "a/b/c", false},
		{"+", "a", true},
		{"+", "+", true},
		{"+", "#", false},
		{"+", "a/b", false},
		{"+/#", "#", false}, // under i/{tenant}/, "#" also matches i/{tenant} itself
		{"+/#", "+/#", true},
		{"a/+/endpoints/#", "a/x/endpoints", true},
		{"a/+/endpoints/#", "a/+/endpoints/modbus/+", true},
		{"a/+/endpoints/#", "a/+/+/modbus", false},
	}
	for _, tt := range tests {
		if got := covers(tt.pattern, tt.filter); got != tt.want {
			t.Errorf("covers(%q, %q) = %v, want %v", tt.pattern, tt.filter, got, tt.want)
		}
	}
}

// TestCoversExhaustive compares covers with the definition over every
// pattern and filter of up to three levels from {a, b, +, #} and every
// topic of up to five levels from {a, b, c}, all under one fixed first
// level (as i/{tenant}/ is): covers(p, f) must hold exactly when every
// topic f matches is matched by p.
func TestCoversExhaustive(t *testing.T) {
	filters := filtersUpTo(3, []string{"a", "b", "+", "#"})
	var topics []string
	var grow func(prefix string, depth int)
	grow = func(prefix string, depth int) {
		topics = append(topics, prefix)
		if depth == 5 {
			return
		}
		for _, l := range []string{"a", "b", "c"} {
			grow(prefix+"/"+l, depth+1)
		}
	}
	grow("r", 0)
	for _, p := range filters {
		for _, f := range filters {
			want := true
			for _, topic := range topics {
				if matches("r/"+f, topic) && !matches("r/"+p, topic) {
					want = false
					break
				}
			}
			if got := covers(p, f); got != want {
				t.Errorf("covers(%q, %q) = %v, want %v", p, f, got, want)
			}
		}
	}
}

// filtersUpTo returns the valid filters of 1..n levels from alphabet.
func filtersUpTo(n int, alphabet []string) []string {
	var out []string
	var build func(prefix string, depth int)
	build = func(prefix string, depth int) {
		if depth > 0 {
			out = append(out, prefix)
			if strings.HasSuffix(prefix, "#") {
				return
			}
		}
		if depth == n {
			return
		}
		for _, l := range alphabet {
			next := l
			if prefix != "" {
				next = prefix + "/" + l
			}
			build(next, depth+1)
		}
	}
	build("", 0)
	return out
}

func TestValidatePattern(t *testing.T) {
	tests := []struct {
		pattern string
		ok      bool
	}{
		{"#", true},
		{"+", true},
		{"a/+/endpoints/#", true},
		{"scada/setpoints/pump 1", true},
		{"$x/y", true}, // below i/{tenant}/ a '$' level is an ordinary level
		{"", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{"a/#/b", false},
		{"a/b#", false},
		{"a/b+", false},
		{"a+/b", false},
		{"a/\x00", false},
		{"a/\n", false},
		{"a/\xff", false},
		{strings.Repeat("a", MaxPatternLen), true},
		{strings.Repeat("a", MaxPatternLen+1), false},
	}
	for _, tt := range tests {
		err := ValidatePattern(tt.pattern)
		if (err == nil) != tt.ok {
			t.Errorf("ValidatePattern(%q) = %v, want ok=%v", tt.pattern, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidPattern) {
			t.Errorf("ValidatePattern(%q) = %v, does not wrap ErrInvalidPattern", tt.pattern, err)
		}
	}
}

func TestBrokerUserTopics(t *testing.T) {
	id := brokerUserID(userRules...)
	tests := []struct {
		name  string
		topic string
		pub   string // "" allowed, else the reason
		sub   string
	}{
		{name: "endpoint data of any agent", topic: "i/{T}/a/{A}/endpoints/modbus", pub: ReasonNoRule},
		{name: "endpoint subtree filter", topic: "i/{T}/a/+/endpoints/#", pub: ReasonInvalidTopic},
		{name: "endpoints parent level", topic: "i/{T}/a/{A2}/endpoints", pub: ReasonNoRule},
		{name: "other agent data", topic: "i/{T}/a/{A}/state", pub: ReasonNoRule, sub: ReasonNoRule},
		{name: "agent wildcard too wide", topic: "i/{T}/a/#", pub: ReasonInvalidTopic, sub: ReasonNoRule},
		{name: "setpoint", topic: "i/{T}/scada/setpoints/pump1", sub: ReasonNoRule},
		{name: "setpoint filter", topic: "i/{T}/scada/setpoints/+", pub: ReasonInvalidTopic, sub: ReasonNoRule},
		{name: "setpoint below", topic: "i/{T}/scada/setpoints/pump1/x", pub: ReasonNoRule, sub: ReasonNoRule},
		{name: "bridge both ways", topic: "i/{T}/bridge/x/y"},
		{name: "bridge parent", topic: "i/{T}/bridge"},
		{name: "bridge filter", topic: "i/{T}/bridge/#", pub: ReasonInvalidTopic},
		{name: "commands readable by rule", topic: "i/{T}/a/{A}/cmd/jobs", pub: ReasonCommandTopic},
		{name: "command level itself", topic: "i/{T}/a/{A}/cmd", pub: ReasonCommandTopic},
		{name: "tenant root", topic: "i/{T}", pub: ReasonForeignTopic, sub: ReasonForeignTopic},
		{name: "tenant root slash", topic: "i/{T}/", pub: ReasonForeignTopic, sub: ReasonForeignTopic},
		{name: "whole tenant", topic: "i/{T}/#", pub: ReasonInvalidTopic, sub: ReasonNoRule},
		{name: "other tenant", topic: "i/{T2}/bridge/x", pub: ReasonForeignTopic, sub: ReasonForeignTopic},
		{name: "tenant wildcard", topic: "i/+/bridge/x", pub: ReasonInvalidTopic, sub: ReasonForeignTopic},
		{name: "everything", topic: "#", pub: ReasonInvalidTopic, sub: ReasonForeignTopic},
		{name: "sys", topic: "$SYS/broker/clients", pub: ReasonForeignTopic, sub: ReasonForeignTopic},
		{name: "shared subscription", topic: "$share/g/i/{T}/bridge/#", pub: ReasonInvalidTopic, sub: ReasonForeignTopic},
		{name: "empty level", topic: "i/{T}/bridge//x", pub: ReasonInvalidTopic, sub: ReasonInvalidTopic},
		{name: "trailing slash", topic: "i/{T}/bridge/", pub: ReasonInvalidTopic, sub: ReasonInvalidTopic},
		{name: "misplaced hash", topic: "i/{T}/bridge/#/x", pub: ReasonInvalidTopic, sub: ReasonInvalidTopic},
		{name: "partial plus", topic: "i/{T}/bridge/x+", pub: ReasonInvalidTopic, sub: ReasonInvalidTopic},
		{name: "control character", topic: "i/{T}/bridge/\x00", pub: ReasonInvalidTopic, sub: ReasonInvalidTopic},
		{name: "invalid UTF-8", topic: "i/{T}/bridge/\xff", pub: ReasonInvalidTopic, sub: ReasonInvalidTopic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := topicOf(t, tt.topic)
			if got := publishReason(id, topic); got != tt.pub {
				t.Errorf("publish %q: reason %q, want %q", topic, got, tt.pub)
			}
			if got := subscribeReason(id, topic); got != tt.sub {
				t.Errorf("subscribe %q: reason %q, want %q", topic, got, tt.sub)
			}
		})
	}
	t.Run("no rules", func(t *testing.T) {
		none := brokerUserID()
		for _, topic := range []string{"i/{T}/bridge/x", "i/{T}/#"} {
			topic = topicOf(t, topic)
			if publishReason(none, topic) == "" || subscribeReason(none, topic) == "" {
				t.Errorf("a broker user without rules may use %q", topic)
			}
		}
	})
	t.Run("identity without tenant", func(t *testing.T) {
		broken := Identity{Username: brokerUser, ACL: &ACL{Rules: []Rule{{Pattern: "#", Publish: true, Subscribe: true}}}}
		if publishReason(broken, "i/x/y") != ReasonForeignTopic || subscribeReason(broken, "#") != ReasonForeignTopic {
			t.Error("a broker user without a tenant may use topics")
		}
	})
}

func TestAuthenticateBrokerUser(t *testing.T) {
	tests := []struct {
		name     string
		user     string
		pass     string
		clientID string
		stored   Identity // the store's answer for brokerUser
		want     string
	}{
		{name: "username as client id", user: brokerUser, pass: brokerPassword, clientID: brokerUser},
		{name: "client id with suffix", user: brokerUser, pass: brokerPassword, clientID: brokerUser + ":historian-2"},
		{name: "client id with empty suffix", user: brokerUser, pass: brokerPassword, clientID: brokerUser + ":"},
		{name: "other client id", user: brokerUser, pass: brokerPassword, clientID: "historian", want: ReasonBadClientID},
		{name: "username prefix without separator", user: brokerUser, pass: brokerPassword, clientID: brokerUser + "-2", want: ReasonBadClientID},
		{name: "device client id", user: brokerUser, pass: brokerPassword, clientID: deviceClientID, want: ReasonBadClientID},
		{name: "wrong password", user: brokerUser, pass: "guess", clientID: brokerUser, want: ReasonBadCredentials},
		{name: "empty password", user: brokerUser, pass: "", clientID: brokerUser, want: ReasonBadCredentials},
		{name: "device key with its own name as client id", user: deviceKey, pass: devicePassword, clientID: deviceKey, want: ReasonBadClientID},
		{name: "store claims an agent", user: brokerUser, pass: brokerPassword, clientID: brokerUser,
			stored: Identity{TenantUUID: tenantUUID, AgentUUID: agentUUID, ACL: &ACL{}}, want: ReasonStoreError},
		{name: "store without tenant", user: brokerUser, pass: brokerPassword, clientID: brokerUser,
			stored: Identity{ACL: &ACL{}}, want: ReasonStoreError},
		{name: "store with a bad pattern", user: brokerUser, pass: brokerPassword, clientID: brokerUser,
			stored: Identity{TenantUUID: tenantUUID, ACL: &ACL{Rules: []Rule{{Pattern: "a/#/b", Publish: true}}}}, want: ReasonStoreError},
		{name: "store with too many rules", user: brokerUser, pass: brokerPassword, clientID: brokerUser,
			stored: Identity{TenantUUID: tenantUUID, ACL: &ACL{Rules: make([]Rule, MaxRules+1)}}, want: ReasonStoreError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newMemStore()
			stored := tt.stored
			if stored == (Identity{}) {
				stored = brokerUserID(userRules...)
			}
			addBrokerUser(store, brokerUser, brokerPassword, stored)
			a, _, denies := newTestAuthorizer(t, store, nil)
			id, err := a.Authenticate(context.Background(), tt.user, tt.pass, tt.clientID)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Authenticate = %v, want allowed", err)
				}
				if !id.IsBrokerUser() || id.Superuser || id.AgentUUID != "" || id.TenantUUID != tenantUUID || id.Username != tt.user {
					t.Fatalf("identity = %+v", id)
				}
				if len(id.ACL.Rules) != len(userRules) {
					t.Errorf("rules = %+v", id.ACL.Rules)
				}
				return
			}
			if err == nil {
				t.Fatalf("Authenticate allowed %+v, want %s", id, tt.want)
			}
			if ev, _ := denies.last(); ev.Reason != tt.want {
				t.Errorf("deny reason = %q, want %q", ev.Reason, tt.want)
			}
		})
	}
}

// TestBrokerUserNeverSuperuser: a store answer cannot make a broker user a
// superuser, and its rules are the Authorizer's own copy.
func TestBrokerUserNeverSuperuser(t *testing.T) {
	store := newMemStore()
	rules := []Rule{{Pattern: "bridge/#", Publish: true}}
	stored := brokerUserID(rules...)
	stored.Superuser = true
	addBrokerUser(store, brokerUser, brokerPassword, stored)
	a, _, _ := newTestAuthorizer(t, store, nil)
	ctx := context.Background()
	id, err := a.Authenticate(ctx, brokerUser, brokerPassword, brokerUser)
	if err != nil {
		t.Fatal(err)
	}
	if id.Superuser || a.Superuser(ctx, brokerUser) {
		t.Fatalf("broker user became a superuser: %+v", id)
	}
	rules[0].Pattern = "#"
	if a.Authorize(ctx, id, topicOf(t, "i/{T}/other"), AccessWrite) {
		t.Fatal("changing the store's slice after the answer widened the rules")
	}
	if !a.Authorize(ctx, id, topicOf(t, "i/{T}/bridge/x"), AccessWrite) {
		t.Fatal("rule lost")
	}
}

func TestBrokerUserCheckACL(t *testing.T) {
	store := newMemStore()
	addBrokerUser(store, brokerUser, brokerPassword, brokerUserID(userRules...))
	a, _, denies := newTestAuthorizer(t, store, nil)
	ctx := context.Background()
	clientID := brokerUser + ":bridge"
	if _, err := a.Authenticate(ctx, brokerUser, brokerPassword, clientID); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		clientID string
		topic    string
		acc      Access
		want     string
	}{
		{name: "subscribe", clientID: clientID, topic: "i/{T}/a/+/endpoints/#", acc: AccessSubscribe},
		{name: "read", clientID: clientID, topic: "i/{T}/a/{A}/endpoints/x", acc: AccessRead},
		{name: "read and write", clientID: clientID, topic: "i/{T}/bridge/x", acc: AccessRead | AccessWrite},
		{name: "read and write without write rule", clientID: clientID, topic: "i/{T}/a/{A}/endpoints/x", acc: AccessRead | AccessWrite, want: ReasonNoRule},
		{name: "another client id of the user", clientID: brokerUser, topic: "i/{T}/bridge/x", acc: AccessWrite},
		{name: "foreign client id", clientID: "other", topic: "i/{T}/bridge/x", acc: AccessWrite, want: ReasonBadClientID},
		{name: "device client id", clientID: deviceClientID, topic: "i/{T}/bridge/x", acc: AccessWrite, want: ReasonBadClientID},
		{name: "other tenant", clientID: clientID, topic: "i/{T2}/bridge/x", acc: AccessWrite, want: ReasonForeignTopic},
		{name: "command publish", clientID: clientID, topic: "i/{T}/a/{A}/cmd/x", acc: AccessWrite, want: ReasonCommandTopic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := a.CheckACL(ctx, brokerUser, tt.clientID, topicOf(t, tt.topic), tt.acc)
			if got != (tt.want == "") {
				t.Fatalf("CheckACL = %v, want reason %q", got, tt.want)
			}
			if tt.want != "" {
				ev, _ := denies.last()
				if ev.Reason != tt.want || ev.TenantUUID != tenantUUID {
					t.Errorf("deny event = %+v, want reason %q with the tenant", ev, tt.want)
				}
			}
		})
	}
}

// TestBrokerUserRevocation: Invalidate takes a broker user's rights from
// the sessions that connected before, not only from new connections; a
// store answer that changed nothing keeps them.
func TestBrokerUserRevocation(t *testing.T) {
	store := newMemStore()
	addBrokerUser(store, brokerUser, brokerPassword, brokerUserID(userRules...))
	a, clk, _ := newTestAuthorizer(t, store, func(o *Options) { o.CacheTTL = time.Minute })
	ctx := context.Background()
	bridge := topicOf(t, "i/{T}/bridge/x")

	session, err := a.Authenticate(ctx, brokerUser, brokerPassword, brokerUser)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Authorize(ctx, session, bridge, AccessWrite) {
		t.Fatal("fresh session refused")
	}

	// The cache expires and a second client logs in: the store's answer is
	// the same, so the first session keeps its rights.
	clk.Add(2 * time.Minute)
	second, err := a.Authenticate(ctx, brokerUser, brokerPassword, brokerUser+":2")
	if err != nil {
		t.Fatal(err)
	}
	if store.callCount() != 2 {
		t.Fatalf("store calls = %d, want 2", store.callCount())
	}
	if !a.Authorize(ctx, session, bridge, AccessWrite) || !a.Authorize(ctx, second, bridge, AccessWrite) {
		t.Fatal("an unchanged store answer cut a session off")
	}

	// The admin narrows the rules: both sessions lose everything at once,
	// a new connection gets the new rules.
	addBrokerUser(store, brokerUser, brokerPassword, brokerUserID(Rule{Pattern: "scada/#", Publish: true}))
	a.Invalidate(brokerUser)
	for _, id := range []Identity{session, second} {
		if a.Authorize(ctx, id, bridge, AccessWrite) || a.Authorize(ctx, id, topicOf(t, "i/{T}/scada/x"), AccessWrite) {
			t.Fatal("a session kept rights after Invalidate")
		}
	}
	if a.CheckACL(ctx, brokerUser, brokerUser, bridge, AccessWrite) {
		t.Fatal("CheckACL allowed an invalidated broker user")
	}
	third, err := a.Authenticate(ctx, brokerUser, brokerPassword, brokerUser)
	if err != nil {
		t.Fatal(err)
	}
	if a.Authorize(ctx, third, bridge, AccessWrite) || !a.Authorize(ctx, third, topicOf(t, "i/{T}/scada/x"), AccessWrite) {
		t.Fatal("the new connection does not have the new rules")
	}
	if a.Authorize(ctx, session, topicOf(t, "i/{T}/scada/x"), AccessWrite) {
		t.Fatal("an old session got the new rules")
	}

	// Deleted: the next connect is refused and so is the open session.
	store.revoke(brokerUser)
	a.Invalidate(brokerUser)
	if _, err := a.Authenticate(ctx, brokerUser, brokerPassword, brokerUser); !errors.Is(err, ErrDenied) {
		t.Fatalf("connect after delete = %v, want refused", err)
	}
	if a.Authorize(ctx, third, topicOf(t, "i/{T}/scada/x"), AccessWrite) {
		t.Fatal("session of a deleted broker user kept its rights")
	}
}

// TestBrokerUserRecreatedInAnotherTenant: a username deleted in one tenant
// and created again in another never lends the new account's rights to the
// old account's open sessions.
func TestBrokerUserRecreatedInAnotherTenant(t *testing.T) {
	store := newMemStore()
	rules := []Rule{{Pattern: "#", Publish: true, Subscribe: true}}
	addBrokerUser(store, brokerUser, brokerPassword, brokerUserID(rules...))
	a, _, _ := newTestAuthorizer(t, store, nil)
	ctx := context.Background()
	old, err := a.Authenticate(ctx, brokerUser, brokerPassword, brokerUser)
	if err != nil {
		t.Fatal(err)
	}
	addBrokerUser(store, brokerUser, "new-password", Identity{TenantUUID: otherTenantUUID, ACL: &ACL{Rules: rules}})
	a.Invalidate(brokerUser)
	fresh, err := a.Authenticate(ctx, brokerUser, "new-password", brokerUser)
	if err != nil {
		t.Fatal(err)
	}
	if a.Authorize(ctx, old, topicOf(t, "i/{T}/x"), AccessWrite) || a.Authorize(ctx, old, topicOf(t, "i/{T2}/x"), AccessWrite) {
		t.Fatal("the old account's session kept or gained rights")
	}
	if !a.Authorize(ctx, fresh, topicOf(t, "i/{T2}/x"), AccessWrite) || a.Authorize(ctx, fresh, topicOf(t, "i/{T}/x"), AccessWrite) {
		t.Fatal("the new account does not have exactly its tenant's topics")
	}
}

// FuzzBrokerUserFilter: whatever the rules and the filter, a filter
// accepted for a broker user matches only topics inside its tenant's space
// that one of its subscribe rules matches, and an accepted publish topic is
// inside that space, outside the command subtrees and matched by a publish
// rule. Topics matched by the filter are built from it by filling its
// wildcards with fuzzed levels, and checked with the reference matcher.
func FuzzBrokerUserFilter(f *testing.F) {
	tenant := topicID(f, tenantUUID)
	other := topicID(f, otherTenantUUID)
	seeds := []struct{ p1, p2, filter, fill string }{
		{"#", "a/+/endpoints/#", "i/" + tenant + "/#", "x/y/z"},
		{"a/+/endpoints/#", "bridge/+", "i/" + tenant + "/a/+/endpoints/#", "agent/modbus/1"},
		{"a/+/endpoints/#", "bridge/+", "i/" + tenant + "/a/#", "agent/state"},
		{"a/+", "b", "i/" + tenant + "/a/+/#", "p/q"},
		{"+/#", "x", "i/" + tenant + "/#", ""},
		{"#", "#", "i/+/#", "x"},
		{"#", "#", "i/" + other + "/#", "x"},
		{"#", "#", "#", "i/" + other + "/x"},
		{"#", "#", "+/" + tenant + "/#", "i/x"},
		{"#", "#", "$share/g/i/" + tenant + "/#", "x"},
		{"#", "#", "i/" + tenant + "/a/x/cmd/y", ""},
		{"a/b", "a/+/c", "i/" + tenant + "/a/+/c", "b"},
	}
	for _, s := range seeds {
		f.Add(s.p1, s.p2, s.filter, s.fill, true, false)
	}
	f.Fuzz(func(t *testing.T, p1, p2, filter, fill string, pub1, pub2 bool) {
		var rules []Rule
		for _, r := range []Rule{{Pattern: p1, Publish: pub1, Subscribe: true}, {Pattern: p2, Publish: pub2, Subscribe: !pub2}} {
			if ValidatePattern(r.Pattern) == nil {
				rules = append(rules, r)
			}
		}
		id := Identity{Username: brokerUser, TenantUUID: tenantUUID, ACL: &ACL{Rules: rules}}
		prefix := "i/" + tenant + "/"
		inTenant := func(topic string) bool { return topic == "i/"+tenant || strings.HasPrefix(topic, prefix) }
		allowedBy := func(topic string, publish bool) bool {
			for _, r := range rules {
				if (publish && r.Publish || !publish && r.Subscribe) && matches(prefix+r.Pattern, topic) {
					return true
				}
			}
			return false
		}

		if subscribeReason(id, filter) == "" {
			var levels []string
			if fill != "" {
				levels = strings.Split(fill, "/")
			}
			topic := fillFilter(filter, levels)
			if !matches(filter, topic) {
				t.Fatalf("BUG in the test: %q does not match the topic %q built from it", filter, topic)
			}
			if !inTenant(topic) {
				t.Fatalf("accepted filter %q matches %q outside the tenant", filter, topic)
			}
			if !allowedBy(topic, false) {
				t.Fatalf("accepted filter %q matches %q, which no subscribe rule of %+v matches", filter, topic, rules)
			}
		}
		if publishReason(id, filter) == "" {
			if !strings.HasPrefix(filter, prefix) || isCommandTopic(strings.TrimPrefix(filter, prefix)) || !allowedBy(filter, true) {
				t.Fatalf("publish to %q accepted with rules %+v", filter, rules)
			}
		}
	})
}

// fillFilter builds a topic the filter matches: each '+' takes the next
// fill level, '#' all that are left (none: the filter's parent level).
func fillFilter(filter string, fill []string) string {
	var levels []string
	for l := range strings.SplitSeq(filter, "/") {
		switch l {
		case "+":
			next := "x"
			if len(fill) > 0 {
				next, fill = fill[0], fill[1:]
			}
			levels = append(levels, strings.NewReplacer("+", "", "#", "").Replace(next))
		case "#":
			for _, rest := range fill {
				levels = append(levels, strings.NewReplacer("+", "", "#", "").Replace(rest))
			}
			return strings.Join(levels, "/")
		default:
			levels = append(levels, l)
		}
	}
	return strings.Join(levels, "/")
}
