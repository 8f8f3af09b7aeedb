package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/logging"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
)

// syncBuffer lets a test read a command's output while it still runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// clearEnv keeps the developer's shell out of command tests.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range config.Keys {
		for _, env := range append([]string{k.Env}, k.Aliases...) {
			if _, ok := os.LookupEnv(env); ok {
				t.Setenv(env, "")
				os.Unsetenv(env)
			}
		}
	}
}

func TestHelpListsTheRoles(t *testing.T) {
	code, out, _ := run(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, role := range []string{"serve-api", "ingest", "agent", "all-in-one", "version", "codec"} {
		if !strings.Contains(out, "\n  "+role+" ") {
			t.Errorf("--help does not list %s:\n%s", role, out)
		}
	}
}

func TestRoleHelpShowsFlagDefaults(t *testing.T) {
	tests := map[string][]string{
		"serve-api":  {"--port int", "(default 3002)", "--config string", "--print-config"},
		"ingest":     {"--port int", "(default 3003)", `--profile string`, `(default "balanced")`},
		"agent":      {"(default 48484)", `(default "LOCALHOST_ONLY")`},
		"all-in-one": {"--data-dir string", `(default "./edgeplat-data")`, "--api-port int", "--ingest-port int", "(default 3003)", "--agent-port int", "--mqtt-port int", "(default 1883)"},
	}
	for role, wants := range tests {
		t.Run(role, func(t *testing.T) {
			code, out, _ := run(t, role, "--help")
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			for _, w := range wants {
				if !strings.Contains(out, w) {
					t.Errorf("%s --help lacks %q:\n%s", role, w, out)
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "edgeplat dev (commit ") {
		t.Errorf("version = %d %q", code, out)
	}
	code, out, _ = run(t, "version", "--json")
	if code != 0 || !strings.Contains(out, `"version": "dev"`) {
		t.Errorf("version --json = %d %q", code, out)
	}
}

func TestPrintConfig(t *testing.T) {
	clearEnv(t)
	t.Setenv("DB_PASSWORD", "s3cr3t-value")
	code, out, errOut := run(t, "serve-api", "--print-config", "--port", "4002")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"port: 4002  # flag --port", `password: "<redacted>"  # env DB_PASSWORD`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cr3t") {
		t.Error("secret printed")
	}

	dir := t.TempDir()
	code, out, _ = run(t, "all-in-one", "--print-config", "--data-dir", dir, "--mqtt-port", "1999")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		fmt.Sprintf("sqlite_path: %q  # derived", filepath.Join(dir, "edgeplat.db")),
		`broker_url: "tcp://127.0.0.1:1999"  # derived`,
		`driver: "memory"  # default`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("all-in-one output lacks %q:\n%s", want, out)
		}
	}
}

func TestBadInputExitsNonZeroWithClearMessage(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{name: "port out of range", env: map[string]string{"DB_PORT": "70000"}, args: []string{"serve-api"},
			want: []string{"edgeplat serve-api: invalid configuration: db.port (DB_PORT) must be 1..65535, got 70000"}},
		{name: "every problem at once", env: map[string]string{"DB_PORT": "70000", "MQTT_QOS": "5"}, args: []string{"serve-api"},
			want: []string{"invalid configuration (2 problems):", "  - db.port (DB_PORT) must be 1..65535, got 70000", "  - mqtt.qos (MQTT_QOS) must be 0..2, got 5"}},
		{name: "bad flag value", args: []string{"serve-api", "--port", "x"},
			want: []string{`invalid argument "x" for "--port" flag`}},
		{name: "flag out of range", args: []string{"all-in-one", "--mqtt-port", "0", "--print-config"},
			want: []string{"all_in_one.mqtt_port (EDGEPLAT_ALL_IN_ONE_MQTT_PORT) must be 1..65535, got 0"}},
		{name: "unknown flag", args: []string{"ingest", "--nope"}, want: []string{"unknown flag: --nope"}},
		{name: "missing config file", args: []string{"agent", "--config", "/nonexistent/agent.yaml"},
			want: []string{"read config file /nonexistent/agent.yaml"}},
		{name: "weak agent key", env: map[string]string{"API_SECURITY_MODE": "API_KEY", "API_KEY": "short"}, args: []string{"agent", "--print-config"},
			want: []string{"edgeplat agent: invalid configuration: agent.api_key (API_KEY) must be at least 16 characters"}},
		{name: "unknown command", args: []string{"serve"}, want: []string{`unknown command "serve"`}},
		{name: "no token key", args: []string{"serve-api"},
			want: []string{"edgeplat serve-api: invalid configuration: no signing key: set jwt.secret (JWT_SECRET), at least 32 bytes, or jwt.private_key (JWT_PRIVATE_KEY)"}},
		{name: "short token secret", env: map[string]string{"JWT_SECRET": "too-short"}, args: []string{"serve-api"},
			want: []string{"jwt.secret (JWT_SECRET) must be at least 32 bytes, got 9"}},
		{name: "token key file missing", env: map[string]string{"JWT_PRIVATE_KEY": "/nonexistent/jwt.pem"}, args: []string{"serve-api"},
			want: []string{"jwt.private_key (JWT_PRIVATE_KEY): neither PEM text nor a readable file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, _, errOut := run(t, tt.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

type aioPorts struct{ api, ingest, agent, mqtt int }

// startAllInOne runs all-in-one on free ports with a clean environment
// and a fresh data directory, and returns its ports and the agent's URL
// once the agent answers ready.
func startAllInOne(t *testing.T) (aioPorts, string) {
	t.Helper()
	clearEnv(t)
	p := freeAIOPorts(t)
	startRole(t, fmt.Sprintf("http://127.0.0.1:%d/health", p.api), p.args(filepath.Join(t.TempDir(), "data"))...)
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", p.agent)
	coretest.Eventually(t, 30*time.Second, "the agent to be ready", func() bool {
		code, _, err := get(agentURL + "/v1/readiness")
		return err == nil && code == http.StatusOK
	})
	return p, agentURL
}

func freeAIOPorts(t *testing.T) aioPorts {
	return aioPorts{coretest.FreePort(t), coretest.FreePort(t), coretest.FreePort(t), coretest.FreePort(t)}
}

// args runs all-in-one on p without auto-provisioning, for tests that
// bootstrap the admin or provision the agent themselves.
func (p aioPorts) args(dataDir string) []string {
	return []string{"all-in-one", "--data-dir", dataDir, "--log-format", "json",
		"--api-port", strconv.Itoa(p.api), "--ingest-port", strconv.Itoa(p.ingest),
		"--agent-port", strconv.Itoa(p.agent), "--mqtt-port", strconv.Itoa(p.mqtt), "--auto-provision=false"}
}

func get(url string) (int, string, error) { return getWithToken(url, "") }

// runAllInOneOn runs all-in-one's services, as buildAllInOne composes them,
// with the database dbc; it returns the exit code execute would.
func runAllInOneOn(ctx context.Context, t *testing.T, p aioPorts, dataDir string, dbc config.DB, stderr io.Writer) int {
	file := filepath.Join(t.TempDir(), "aio.yaml")
	yaml := fmt.Sprintf("all_in_one:\n  data_dir: %s\n  mqtt_port: %d\n  auto_provision: false\napi:\n  port: %d\ningest:\n  port: %d\nagent:\n  port: %d\n",
		dataDir, p.mqtt, p.api, p.ingest, p.agent)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Error(err)
		return exitFailure
	}
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAllInOne, File: file})
	if err != nil {
		t.Error(err)
		return exitFailure
	}
	cfg.DB = dbc
	log, _ := logging.New(stderr, slog.LevelInfo, "json")
	r := &rt.Runtime{Logger: log, Metrics: metrics.NewRegistry(), Health: health.New(2 * time.Second)}
	services, err := buildAllInOne(cfg, r, io.Discard)
	if err != nil {
		t.Error(err)
		return exitFailure
	}
	if err := lifecycle.Run(ctx, lifecycle.Options{Logger: log, GracePeriod: cfg.Lifecycle.ShutdownGrace}, services...); err != nil {
		t.Errorf("all-in-one on PostgreSQL: %v", err)
		return exitFailure
	}
	return 0
}

// postJSON posts body and checks the status; it returns the decoded answer.
func postJSON(t *testing.T, url, bearer, body string, want int) map[string]any {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s, want %d", url, resp.StatusCode, raw, want)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

func getWithToken(url, bearerToken string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if bearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+bearerToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestAllInOneSmoke runs all-in-one in-process the way the README's quick
// start does: /health answers, a real MQTT client connects to the embedded
// broker, every role's port answers, and cancelling (what SIGINT does)
// shuts everything down with exit code 0.
func TestAllInOneSmoke(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) { allInOneSmoke(t, engine) })
	}
}

// allInOneSmoke runs all-in-one on its embedded defaults, or with its
// database on PostgreSQL, and drives it as an operator and an agent would.
func allInOneSmoke(t *testing.T, engine string) {
	clearEnv(t)
	p := freeAIOPorts(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	exit := make(chan int, 1)
	var dbc config.DB
	// The second tenant below signs itself up.
	t.Setenv("ALLOW_REGISTRATION", "true")
	if engine == "sqlite" {
		go func() { exit <- execute(ctx, p.args(dataDir), io.Discard, &stderr) }()
	} else {
		// all-in-one's configuration admits SQLite only; its composition
		// runs on PostgreSQL all the same, which is what this drives.
		dbc = coretest.Postgres(t)
		go func() { exit <- runAllInOneOn(ctx, t, p, dataDir, dbc, &stderr) }()
	}
	var health string
	ok := false
	for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		code, body, err := get(fmt.Sprintf("http://127.0.0.1:%d/health", p.api))
		health, ok = body, err == nil && code == http.StatusOK
	}
	if !ok {
		t.Fatalf("GET /health did not answer 200 within 10 s (last: %s); stderr:\n%s", health, stderr.String())
	}
	for _, want := range []string{`"status":"ok"`, `"db":"up"`, `"streamstore":"up"`, `"mqtt":"up"`, `"mqtt-broker":"up"`} {
		if !strings.Contains(health, want) {
			t.Errorf("health body = %s, want %s", health, want)
		}
	}

	// The provisioning flow, as an operator and an agent run it: the first
	// admin, a login, a provisioning key, the agent's registration, and its
	// connection to the embedded broker with what registration returned.
	apiURL := fmt.Sprintf("http://127.0.0.1:%d/api/v1", p.api)
	admin := postJSON(t, apiURL+"/auth/bootstrap-admin", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusCreated)
	if again := postJSON(t, apiURL+"/auth/bootstrap-admin", "", `{"email":"late@example.com","password":"correct horse battery"}`, http.StatusConflict); again["error"] == nil {
		t.Errorf("second bootstrap: %v", again)
	}
	login := postJSON(t, apiURL+"/auth/login", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusOK)
	access, _ := login["accessToken"].(string)
	if access == "" || admin["accessToken"] == nil {
		t.Fatalf("no access token: %v", login)
	}
	pk := postJSON(t, apiURL+"/provisioning/keys", access, ``, http.StatusCreated)
	reg := postJSON(t, apiURL+"/provision/agent", "", fmt.Sprintf(`{"key":%q,"agentName":"line-1"}`, pk["key"]), http.StatusCreated)
	postJSON(t, apiURL+"/provision/agent", "", fmt.Sprintf(`{"key":%q,"agentName":"line-2"}`, pk["key"]), http.StatusUnauthorized)
	agentUUID, _ := reg["agentUuid"].(string)
	mq, _ := reg["mqtt"].(map[string]any)
	username, _ := mq["username"].(string)
	password, _ := mq["password"].(string)
	clientID, _ := mq["clientId"].(string)
	prefix, _ := mq["topicPrefix"].(string)
	if agentUUID == "" || username == "" || password == "" || clientID != "agent-"+agentUUID || prefix == "" {
		t.Fatalf("registration answer: %v", reg)
	}
	tenant := strings.Split(prefix, "/")[1]

	connect := func(id, user, pass string) (paho.Client, error) {
		opts := paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", p.mqtt)).
			SetClientID(id).SetUsername(user).SetPassword(pass).SetConnectTimeout(5 * time.Second).SetAutoReconnect(false)
		c := paho.NewClient(opts)
		tok := c.Connect()
		if !tok.WaitTimeout(5 * time.Second) {
			return nil, errors.New("connect timed out")
		}
		return c, tok.Error()
	}
	if _, err := connect("anon", "", ""); err == nil {
		t.Error("the embedded broker admitted an anonymous client")
	}
	if _, err := connect(clientID, username, password+"x"); err == nil {
		t.Error("the embedded broker admitted a wrong password")
	}
	if _, err := connect("agent-0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11", username, password); err == nil {
		t.Error("the embedded broker admitted the device's key under another agent's client id")
	}
	client, err := connect(clientID, username, password)
	if err != nil {
		t.Fatalf("MQTT connect with the registration's credentials: %v", err)
	}
	// Beyond its own topics the device may do nothing: wildcards across
	// agents and tenants are refused at subscribe time, and a publish on
	// another agent's topic never reaches a subscriber.
	for _, filter := range []string{"#", "i/#", "i/+/a/+/endpoints/#", prefix + "/endpoints/#"} {
		tok := client.Subscribe(filter, 1, nil)
		if !tok.WaitTimeout(5 * time.Second) {
			t.Fatalf("subscribe %s timed out", filter)
		}
		code := tok.(*paho.SubscribeToken).Result()[filter]
		if code != 0x80 {
			t.Errorf("subscribe %q with a device key: SUBACK %#x, want 0x80", filter, code)
		}
	}
	// Publish as an agent would: a custom envelope, msgpack+deflate, on its
	// own telemetry topic. It must come out as rows in the SQLite file.
	payload, err := codec.Encode(map[string]any{
		"timestamp": "2026-11-22T10:00:00Z", "protocol": "modbus", "msgId": "v2_Ab12Cd34_1",
		"messages": []any{map[string]any{"readings": []any{
			map[string]any{"deviceName": "plc1", "metric": "temp", "value": 21.5, "unit": "C", "quality": "GOOD"},
			map[string]any{"deviceName": "plc1", "metric": "rpm", "value": 1500, "quality": "GOOD"},
		}}},
	}, codec.EncodeOptions{Format: codec.FormatMsgpackDeflate})
	if err != nil {
		t.Fatal(err)
	}
	topic := prefix + "/endpoints/modbus"
	for range 2 { // the second copy is a duplicate msgId and adds nothing
		if tok := client.Publish(topic, 1, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	state := `{"timestamp":"2026-11-22T10:00:00Z","apps":{"web":{"status":"running"}}}`
	if tok := client.Publish(prefix+"/state", 1, false, state); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Errorf("publish state: %v", tok.Error())
	}
	client.Disconnect(100)

	// A publish on another agent's topic reaches nobody: an observer with
	// the broker's service account (all-in-one keeps its password in the
	// data directory) sees the marker it sends itself, not the forgery.
	servicePassword, err := os.ReadFile(filepath.Join(dataDir, mqttServicePasswordFile))
	if err != nil {
		t.Fatal(err)
	}
	observer, err := connect("smoke-observer", mqttServiceUser, strings.TrimSpace(string(servicePassword)))
	if err != nil {
		t.Fatalf("observer connect: %v", err)
	}
	defer observer.Disconnect(100)
	otherAgent := "i/" + tenant + "/a/AAAAAAAAAAAAAAAAAAAAAA/endpoints/modbus"
	seen := make(chan string, 4)
	if tok := observer.Subscribe(otherAgent, 1, func(_ paho.Client, m paho.Message) { seen <- string(m.Payload()) }); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("observer subscribe: %v", tok.Error())
	}
	forger, err := connect(clientID, username, password)
	if err != nil {
		t.Fatalf("device reconnect: %v", err)
	}
	forger.Publish(otherAgent, 1, false, "forged").WaitTimeout(2 * time.Second)
	forger.Disconnect(100)
	observer.Publish(otherAgent, 1, false, "marker").WaitTimeout(5 * time.Second)
	select {
	case m := <-seen:
		if m != "marker" {
			t.Errorf("the observer got %q before its marker: a device published on another agent's topic", m)
		}
	case <-time.After(5 * time.Second):
		t.Error("the observer's own marker never arrived")
	}

	if engine == "sqlite" {
		dbc = coretest.SQLite(t)
		dbc.SQLitePath = filepath.Join(dataDir, "edgeplat.db")
	}
	rdb, err := db.Open(ctx, dbc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	var rows int
	coretest.Eventually(t, 15*time.Second, "the published readings to become rows", func() bool {
		return rdb.ReadSQL().QueryRowContext(ctx, `SELECT count(*) FROM readings WHERE tenant_id = $1`, tenant).Scan(&rows) == nil && rows >= 2
	})
	time.Sleep(300 * time.Millisecond)
	_ = rdb.ReadSQL().QueryRowContext(ctx, `SELECT count(*) FROM readings WHERE tenant_id = $1`, tenant).Scan(&rows)
	if rows != 2 {
		t.Errorf("rows = %d, want 2 (the duplicate must add nothing)", rows)
	}

	// The state report and the rows come back through the REST API, for
	// this tenant only.
	stateURL := apiURL + "/agents/" + agentUUID + "/current-state"
	if code, _, err := get(stateURL); err != nil || code != http.StatusUnauthorized {
		t.Errorf("current-state without a token: %d %v, want 401", code, err)
	}
	var stateBody string
	coretest.Eventually(t, 5*time.Second, "the agent's state report", func() bool {
		code, body, err := getWithToken(stateURL, access)
		stateBody = body
		return err == nil && code == http.StatusOK
	})
	if !strings.Contains(stateBody, `"status":"running"`) {
		t.Errorf("current-state = %s", stateBody)
	}
	latestURL := apiURL + "/readings/" + agentUUID + "/latest"
	code, latest, err := getWithToken(latestURL, access)
	if err != nil || code != http.StatusOK {
		t.Fatalf("readings latest: %d %v %s", code, err, latest)
	}
	for _, want := range []string{`"plc1.temp"`, `21.5`, `"plc1.rpm"`, `1500`} {
		if !strings.Contains(latest, want) {
			t.Errorf("readings latest = %s, want %s in it", latest, want)
		}
	}
	other := postJSON(t, apiURL+"/auth/register", "", `{"email":"other@example.com","password":"correct horse battery"}`, http.StatusCreated)
	otherToken, _ := other["accessToken"].(string)
	if code, body, err := getWithToken(latestURL, otherToken); err != nil || code != http.StatusNotFound || strings.Contains(body, "plc1") {
		t.Errorf("readings latest for another tenant: %d %v %s, want 404", code, err, body)
	}
	if code, body, _ := getWithToken(latestURL+"?bogus=1", access); code != http.StatusBadRequest || !strings.Contains(body, "bogus") {
		t.Errorf("readings latest with an unknown parameter: %d %s, want 400 naming it", code, body)
	}
	if code, body, _ := getWithToken(apiURL+"/license", access); code != http.StatusOK || !strings.Contains(body, `"demo":true`) || !strings.Contains(body, `"state":"valid"`) {
		t.Errorf("licence of all-in-one: %d %s, want the valid demo licence", code, body)
	}

	for name, url := range map[string]string{
		"agent ping":     fmt.Sprintf("http://127.0.0.1:%d/ping", p.agent),
		"ingest health":  fmt.Sprintf("http://127.0.0.1:%d/health", p.ingest),
		"ingest metrics": fmt.Sprintf("http://127.0.0.1:%d/metrics", p.ingest),
		"api metrics":    fmt.Sprintf("http://127.0.0.1:%d/metrics", p.api),
	} {
		code, body, err := get(url)
		if err != nil || code != http.StatusOK {
			t.Errorf("%s: %d %v", name, code, err)
		}
		if strings.HasSuffix(name, "metrics") && !strings.Contains(body, "edgeplat_build_info") {
			t.Errorf("%s lacks edgeplat_build_info", name)
		}
	}
	if fi, err := os.Stat(dataDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir not created with 0700: %v %v", fi, err)
	}

	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit %d after clean shutdown; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("all-in-one did not stop within the grace period")
	}
	if engine == "sqlite" && !strings.Contains(stderr.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop logged:\n%s", stderr.String())
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestAllInOnePortInUseNamesTheFlag(t *testing.T) {
	clearEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := freeAIOPorts(t)
	p.mqtt = ln.Addr().(*net.TCPAddr).Port
	var stderr bytes.Buffer
	code := execute(context.Background(), p.args(t.TempDir()), io.Discard, &stderr)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	want := fmt.Sprintf("127.0.0.1:%d is already in use; choose another port with --mqtt-port", p.mqtt)
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	if n := strings.Count(stderr.String(), `"level":"ERROR"`); n != 1 {
		t.Errorf("want exactly one error line, got %d:\n%s", n, stderr.String())
	}
}
