package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// cloudSide is a running Cloud API with an admin session and the agent
// it provisioned.
type cloudSide struct {
	apiURL, agentURL, access string
	agent                    string // the provisioned agent's UUID
}

// runAllInOne runs all-in-one on ports p in-process until the test ends,
// and waits until its agent and its API answer as ready.
func runAllInOne(t *testing.T, p aioPorts, dataDir string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	exit := make(chan int, 1)
	go func() { exit <- execute(ctx, p.args(dataDir), io.Discard, &stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exit:
		case <-time.After(20 * time.Second):
			t.Error("all-in-one did not stop")
		}
	})
	coretest.Eventually(t, 20*time.Second, "all-in-one ready", func() bool {
		c1, _, e1 := get(fmt.Sprintf("http://127.0.0.1:%d/v1/readiness", p.agent))
		c2, _, e2 := get(fmt.Sprintf("http://127.0.0.1:%d/health", p.api))
		if e1 == nil && e2 == nil && c1 == http.StatusOK && c2 == http.StatusOK {
			return true
		}
		select {
		case code := <-exit:
			t.Fatalf("all-in-one exited with %d before it was ready:\n%s", code, stderr.String())
		default:
		}
		return false
	})
}

// provisionAgent bootstraps the admin of the Cloud API at apiPort and
// provisions the agent at agentURL with a fresh provisioning key.
func provisionAgent(t *testing.T, apiPort int, agentURL string) cloudSide {
	t.Helper()
	apiURL := fmt.Sprintf("http://127.0.0.1:%d/api/v1", apiPort)
	postJSON(t, apiURL+"/auth/bootstrap-admin", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusCreated)
	login := postJSON(t, apiURL+"/auth/login", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusOK)
	access, _ := login["accessToken"].(string)
	pk := postJSON(t, apiURL+"/provisioning/keys", access, ``, http.StatusCreated)
	out := postJSON(t, agentURL+"/v1/provision", "", fmt.Sprintf(`{"provisioningApiKey":%q,"apiEndpoint":"http://127.0.0.1:%d","deviceName":"line-1"}`, pk["key"], apiPort), http.StatusOK)
	uuid, _ := out["device"].(map[string]any)["uuid"].(string)
	if uuid == "" {
		t.Fatalf("provisioning answered %v", out)
	}
	return cloudSide{apiURL: apiURL, agentURL: agentURL, access: access, agent: uuid}
}

// setStatePoll sets the agent's intervals.statePollMs.
func (c cloudSide) setStatePoll(t *testing.T, ms int) {
	t.Helper()
	if code, body := jsonDo(t, http.MethodPatch, c.agentURL+"/v1/settings", "", fmt.Sprintf(`{"intervals":{"statePollMs":%d}}`, ms)); code != http.StatusOK {
		t.Fatalf("PATCH /v1/settings: %d %v", code, body)
	}
}

// waitPlatformConnected waits until the agent's platform destination is
// connected, which means its command subscription is made too.
func (c cloudSide) waitPlatformConnected(t *testing.T) {
	t.Helper()
	coretest.Eventually(t, 30*time.Second, "the platform destination to connect", func() bool {
		code, body, err := get(c.agentURL + "/v1/buffer/status")
		return err == nil && code == http.StatusOK && strings.Contains(body, `"type":"platform"`) && strings.Contains(body, `"connected":true`)
	})
}

// changeTargetState sends method to the agent's target-state route and
// returns the version the cloud now holds.
func (c cloudSide) changeTargetState(t *testing.T, method, body string) int64 {
	t.Helper()
	code, out := jsonDo(t, method, c.apiURL+"/agents/"+c.agent+"/target-state", c.access, body)
	if code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("%s target-state: %d %v", method, code, out)
	}
	v, _ := out["version"].(float64)
	return int64(v)
}

// targetVersion is the target-state version the agent holds, from GET
// /v1/provision/status.
func (c cloudSide) targetVersion(t *testing.T) int64 {
	t.Helper()
	code, body, err := get(c.agentURL + "/v1/provision/status")
	if err != nil || code != http.StatusOK {
		return -1
	}
	var st struct {
		TargetVersion int64 `json:"targetVersion"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("provision status %s: %v", body, err)
	}
	return st.TargetVersion
}

// checkFastPath: with the poll an hour away, every kind of target-state
// change reaches the agent within 2 s, through the notice on its command
// subtree and the pull it makes at once.
func (c cloudSide) checkFastPath(t *testing.T) {
	t.Helper()
	c.setStatePoll(t, 3600000)
	c.waitPlatformConnected(t)
	for _, ch := range []struct{ method, body string }{
		{http.MethodPut, `{"state":{"schemaVersion":1,"settings":{"runtime":{"maxMemoryMb":4096}}}}`},
		{http.MethodPut, `{"state":{"schemaVersion":1,"settings":{"runtime":{"maxMemoryMb":4097}}}}`},
		{http.MethodDelete, ``},
	} {
		start := time.Now()
		v := c.changeTargetState(t, ch.method, ch.body)
		// The poll is an hour away, so only the notice can bring the
		// change; the budget is wide for loaded CI machines, and the time
		// it took is logged (typically well under 2 s).
		coretest.Eventually(t, 10*time.Second, fmt.Sprintf("the agent to hold version %d after %s", v, ch.method), func() bool {
			return c.targetVersion(t) == v
		})
		t.Logf("%s: version %d held by the agent %v after the request started", ch.method, v, time.Since(start).Round(time.Millisecond))
	}
}

// TestTargetStateNoticeAllInOne: on all-in-one (embedded broker), a
// target-state change reaches the connected agent within 2 s with the
// poll an hour away; and on the embedded broker, with credentials the
// API really issued, agent A can neither subscribe to nor publish on B's
// command subtree while the cloud can publish there.
func TestTargetStateNoticeAllInOne(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one")
	}
	p, agentURL := startAllInOne(t)
	c := provisionAgent(t, p.api, agentURL)
	c.checkFastPath(t)

	t.Run("isolation on the embedded broker", func(t *testing.T) {
		a, b := c.register(t, "iso-a"), c.register(t, "iso-b")
		checkCommandIsolation(t, c, a, b)
	})
}

// registered are the MQTT credentials the API gives a registering agent.
type registered struct {
	uuid, tenant string
	mqtt         struct{ brokerURL, username, password, clientID, prefix string }
}

// register registers an agent directly with the API, as a device would,
// and returns its credentials.
func (c cloudSide) register(t *testing.T, name string) registered {
	t.Helper()
	pk := postJSON(t, c.apiURL+"/provisioning/keys", c.access, ``, http.StatusCreated)
	out := postJSON(t, c.apiURL+"/provision/agent", "", fmt.Sprintf(`{"key":%q,"agentName":%q}`, pk["key"], name), http.StatusCreated)
	var r registered
	r.uuid, _ = out["agentUuid"].(string)
	r.tenant, _ = out["tenantId"].(string)
	m, _ := out["mqtt"].(map[string]any)
	r.mqtt.brokerURL, _ = m["brokerUrl"].(string)
	r.mqtt.username, _ = m["username"].(string)
	r.mqtt.password, _ = m["password"].(string)
	r.mqtt.clientID, _ = m["clientId"].(string)
	r.mqtt.prefix, _ = m["topicPrefix"].(string)
	if r.uuid == "" || r.mqtt.username == "" || r.mqtt.prefix == "" {
		t.Fatalf("registration answered %v", out)
	}
	return r
}

func (r registered) dial(t *testing.T, lost chan<- struct{}) paho.Client {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(r.mqtt.brokerURL).SetClientID(r.mqtt.clientID).
		SetUsername(r.mqtt.username).SetPassword(r.mqtt.password).SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectionLostHandler(func(paho.Client, error) {
			if lost != nil {
				close(lost)
			}
		})
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("agent %s connect: %v", r.uuid, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

func subscribeCode(t *testing.T, c paho.Client, filter string, h paho.MessageHandler) byte {
	t.Helper()
	tok := c.Subscribe(filter, 1, h)
	if !tok.WaitTimeout(10 * time.Second) {
		t.Fatalf("subscribe %q: no SUBACK", filter)
	}
	st, ok := tok.(*paho.SubscribeToken)
	if !ok {
		t.Fatal("not a subscribe token")
	}
	return st.Result()[filter]
}

// checkCommandIsolation: agent a may subscribe to its own command subtree
// and not to b's; a's publish on b's command topic never reaches b, while
// the cloud's notice for b, sent after it, does (so b's subscription
// worked and the forged message would have been seen first).
func checkCommandIsolation(t *testing.T, c cloudSide, a, b registered) {
	t.Helper()
	lostA := make(chan struct{})
	ca := a.dial(t, lostA)
	cb := b.dial(t, nil)
	if code := subscribeCode(t, ca, control.CommandFilter(a.mqtt.prefix), func(paho.Client, paho.Message) {}); code != 1 {
		t.Fatalf("agent A's subscription to its own commands: SUBACK %#x, want 1", code)
	}
	for _, filter := range []string{control.CommandFilter(b.mqtt.prefix), control.CommandTopic(b.mqtt.prefix, control.CmdTargetState), "i/+/a/+/cmd/#"} {
		if code := subscribeCode(t, ca, filter, func(paho.Client, paho.Message) {}); code != 0x80 {
			t.Errorf("agent A subscribing to %q: SUBACK %#x, want 0x80", filter, code)
		}
	}
	got := make(chan string, 8)
	if code := subscribeCode(t, cb, control.CommandFilter(b.mqtt.prefix), func(_ paho.Client, m paho.Message) {
		got <- string(m.Payload())
	}); code != 1 {
		t.Fatalf("agent B's subscription to its own commands: SUBACK %#x", code)
	}
	forged := control.CommandTopic(b.mqtt.prefix, control.CmdTargetState)
	ca.Publish(forged, 1, false, `{"version":999}`).WaitTimeout(5 * time.Second)
	select {
	case <-lostA:
	case <-time.After(10 * time.Second):
		t.Error("the broker kept agent A's connection after it published on B's command topic")
	}
	// The cloud's own notice for B, published after the forged one.
	cb2 := c
	cb2.agent = b.uuid
	v := cb2.changeTargetState(t, http.MethodPut, `{"state":{"schemaVersion":1,"settings":{"runtime":{"maxMemoryMb":4098}}}}`)
	select {
	case m := <-got:
		n, err := control.DecodeTargetStateNotice([]byte(m))
		if err != nil || n.Version != v {
			t.Fatalf("agent B received %q first, want the cloud's notice of version %d", m, v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agent B received no notice from the cloud")
	}
}

// TestTargetStateNoticeSplitRolesMosquittoIntegration: serve-api and an
// agent as separate roles on the machine's Mosquitto (127.0.0.1:1883,
// anonymous access, so it takes the agent's credentials as they are): the
// same fast path.
func TestTargetStateNoticeSplitRolesMosquittoIntegration(t *testing.T) {
	c := startSplitRoles(t, "tcp://"+coretest.MQTTAddr(t))
	c.checkFastPath(t)
}

// startSplitRoles runs serve-api (PostgreSQL, a private Redis, brokerURL)
// and an agent in-process and provisions the agent.
func startSplitRoles(t *testing.T, brokerURL string) cloudSide {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL, redis-server and Mosquitto; -short given")
	}
	clearEnv(t)
	dbc := coretest.Postgres(t)
	redis := coretest.PrivateRedis(t)
	lic, err := licence.Demo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(redis.Addr())
	for k, v := range map[string]string{
		"DB_HOST": dbc.Host, "DB_PORT": strconv.Itoa(dbc.Port), "DB_NAME": dbc.Name, "DB_USER": dbc.User, "DB_SSL": "disable",
		"STREAMSTORE_HOST": host, "STREAMSTORE_PORT": port, "MQTT_BROKER_URL": brokerURL,
		"JWT_SECRET": "control-test-secret-of-at-least-32-bytes", "LICENSE_KEY": lic.Key, "LICENSE_PUBLIC_KEY": lic.PublicKey,
	} {
		t.Setenv(k, v)
	}
	apiPort, agentPort := coretest.FreePort(t), coretest.FreePort(t)
	startRole(t, fmt.Sprintf("http://127.0.0.1:%d/health", apiPort), "serve-api", "--port", strconv.Itoa(apiPort))
	startRole(t, fmt.Sprintf("http://127.0.0.1:%d/v1/readiness", agentPort),
		"agent", "--port", strconv.Itoa(agentPort), "--data-dir", filepath.Join(t.TempDir(), "agent"))
	return provisionAgent(t, apiPort, fmt.Sprintf("http://127.0.0.1:%d", agentPort))
}

// cmdRecorder keeps, in order, the command payloads of one agent on a
// broker; its persistent session outlives a clean broker restart.
type cmdRecorder struct {
	mu  sync.Mutex
	got []string
}

func (r *cmdRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestTargetStateOfflineMosquittoIntegration: with the cloud broker
// stopped, target-state changes reach the agent by its poll (1 s here),
// while their notices wait in serve-api's pending queue; once the broker
// is back they are published, in order.
func TestTargetStateOfflineMosquittoIntegration(t *testing.T) {
	broker := coretest.PrivateMosquitto(t)
	c := startSplitRoles(t, broker.URL())
	c.waitPlatformConnected(t)
	// The sync loop reads the interval when it starts waiting: a change
	// the notice brings makes it start a wait of 1 s.
	c.setStatePoll(t, 1000)
	v0 := c.changeTargetState(t, http.MethodPut, `{"state":{"schemaVersion":1,"settings":{"runtime":{"maxMemoryMb":4099}}}}`)
	coretest.Eventually(t, 10*time.Second, "the agent to hold the first version", func() bool { return c.targetVersion(t) == v0 })

	// The agent's prefix, for the recorder: i/{tenant}/a/{agent}.
	code, me, err := getWithToken(c.apiURL+"/agents/"+c.agent, c.access)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET agent: %d %s %v", code, me, err)
	}
	var ag struct {
		UUID     string `json:"uuid"`
		TenantID string `json:"tenantId"`
	}
	_ = json.Unmarshal([]byte(me), &ag)
	tenant, err1 := codec.ParseUUID(ag.TenantID)
	agent, err2 := codec.ParseUUID(c.agent)
	if err1 != nil || err2 != nil {
		t.Fatalf("agent %s: %v %v", me, err1, err2)
	}
	topic := control.CommandTopic(control.Prefix(tenant, agent), control.CmdTargetState)

	rec := &cmdRecorder{}
	o := paho.NewClientOptions().AddBroker(broker.URL()).SetClientID("control-test-recorder").SetCleanSession(false).
		SetAutoReconnect(true).SetMaxReconnectInterval(200 * time.Millisecond).SetResumeSubs(true)
	o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {})
	rc := paho.NewClient(o)
	if tok := rc.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("recorder connect: %v", tok.Error())
	}
	t.Cleanup(func() { rc.Disconnect(100) })
	if tok := rc.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
		rec.mu.Lock()
		rec.got = append(rec.got, string(m.Payload()))
		rec.mu.Unlock()
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("recorder subscribe: %v", tok.Error())
	}

	broker.Stop()
	metricsURL := strings.TrimSuffix(c.apiURL, "/api/v1") + "/metrics"
	var versions []int64
	for i := range 3 {
		v := c.changeTargetState(t, http.MethodPut, fmt.Sprintf(`{"state":{"schemaVersion":1,"settings":{"runtime":{"maxMemoryMb":%d}}}}`, 5000+i))
		versions = append(versions, v)
	}
	last := versions[len(versions)-1]
	coretest.Eventually(t, 15*time.Second, fmt.Sprintf("the agent's poll to fetch version %d while the broker is away", last), func() bool {
		return c.targetVersion(t) == last
	})
	_, body, _ := get(metricsURL)
	if !strings.Contains(body, "\nedgeplat_api_commands_pending 3\n") {
		t.Errorf("serve-api's metrics while the broker is away lack edgeplat_api_commands_pending 3:\n%s", grepLines(body, "edgeplat_api_commands"))
	}

	broker.Start()
	coretest.Eventually(t, 30*time.Second, "the pending notices after the broker came back", func() bool { return len(rec.all()) >= len(versions) })
	var got []int64
	for _, m := range rec.all() {
		n, err := control.DecodeTargetStateNotice([]byte(m))
		if err != nil {
			t.Fatalf("notice %q: %v", m, err)
		}
		got = append(got, n.Version)
	}
	if !slices.Equal(got, versions) {
		t.Fatalf("notices after the outage: versions %v, want %v in this order", got, versions)
	}
	coretest.Eventually(t, 10*time.Second, "the pending gauge to be 0", func() bool {
		_, body, _ := get(metricsURL)
		return strings.Contains(body, "\nedgeplat_api_commands_pending 0\n")
	})
}

func grepLines(body, substr string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
