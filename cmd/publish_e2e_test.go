package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// pymodbusScript is the Modbus adapter's test server: register i of unit u
// holds u*1000+i.
const pymodbusScript = "../roles/agent/adapters/modbus/testdata/server.py"

// e2eDataPoints are read from unit 1 of the test server.
var e2eDataPoints = map[string]float64{"spindle": 1000, "oil_temp": 1001, "pressure": 1003, "flow": 1005}

const e2eEndpoint = `{"name":"press-1","protocol":"modbus","enabled":true,"poll_interval":1000,"mqtt_topic":"plant/press-1",
 "connection":{"host":"127.0.0.1","port":%d,"unitId":1,"timeoutMs":1000},
 "data_points":[{"name":"spindle","register":"holding:0","type":"uint16","unit":"rpm"},
  {"name":"oil_temp","register":"holding:1","type":"uint16","unit":"C"},
  {"name":"pressure","register":"holding:3","type":"uint16","unit":"bar"},
  {"name":"flow","register":"input:5","type":"uint16","unit":"l/min"}]}`

// proc is a child edgeplat process with its log kept for failures.
type proc struct {
	t    *testing.T
	name string
	args []string
	env  []string
	log  string
	cmd  *exec.Cmd
}

func startProc(t *testing.T, bin, name string, env []string, args ...string) *proc {
	p := &proc{t: t, name: name, args: append([]string{bin}, args...), env: env, log: filepath.Join(t.TempDir(), name+".log")}
	p.start()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			if b, err := os.ReadFile(p.log); err == nil {
				t.Logf("%s log (last 6 KiB):\n%s", name, b[max(0, len(b)-6144):])
			}
		}
	})
	return p
}

func (p *proc) start() {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	c := exec.Command(p.args[0], p.args[1:]...)
	c.Env = p.env
	c.Stdout, c.Stderr = f, f
	if err := c.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd = c
}

// kill sends SIGKILL and waits.
func (p *proc) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = p.cmd.Process.Wait()
	p.cmd = nil
}

// witness subscribes to the second broker the agent publishes to and keeps
// every custom payload it sees by msgId: what the agent produced, whatever
// happened to the cloud broker meanwhile.
type witness struct {
	mu   sync.Mutex
	msgs map[string]witnessed
}

type witnessed struct {
	readings []witnessReading
}

type witnessReading struct {
	metric string // <deviceName>.<metric>
	at     time.Time
	value  float64
}

func newWitness(t *testing.T, brokerURL, topic string) *witness {
	w := &witness{msgs: map[string]witnessed{}}
	opts := paho.NewClientOptions().AddBroker(brokerURL).SetClientID("e2e-witness-" + strconv.FormatInt(time.Now().UnixNano(), 36)).
		SetCleanSession(true).SetAutoReconnect(true).SetOrderMatters(false)
	ready := make(chan error, 1)
	opts.SetOnConnectHandler(func(c paho.Client) {
		tok := c.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) { w.add(t, m.Payload()) })
		tok.Wait()
		select {
		case ready <- tok.Error():
		default:
		}
	})
	c := paho.NewClient(opts)
	if tok := c.Connect(); tok.WaitTimeout(10*time.Second) && tok.Error() != nil {
		t.Fatalf("witness connect: %v", tok.Error())
	}
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("witness subscribe: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("witness not subscribed")
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return w
}

func (w *witness) add(t *testing.T, payload []byte) {
	dec, err := codec.Decode(payload, codec.Limits{})
	if err != nil {
		t.Errorf("witness: undecodable payload: %v", err)
		return
	}
	doc, _ := dec.Value.(map[string]any)
	id, _ := doc["msgId"].(string)
	var got witnessed
	msgs, _ := doc["messages"].([]any)
	for _, m := range msgs {
		rs, _ := m.(map[string]any)["readings"].([]any)
		for _, r := range rs {
			rm, _ := r.(map[string]any)
			at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rm["timestamp"]))
			if err != nil || rm["quality"] != "GOOD" {
				continue
			}
			f, _ := toFloat(rm["value"])
			got.readings = append(got.readings, witnessReading{metric: fmt.Sprint(rm["deviceName"]) + "." + fmt.Sprint(rm["metric"]), at: at, value: f})
		}
	}
	w.mu.Lock()
	w.msgs[id] = got
	w.mu.Unlock()
}

func (w *witness) snapshot() map[string]witnessed {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]witnessed, len(w.msgs))
	for k, v := range w.msgs {
		out[k] = v
	}
	return out
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

func jsonDo(t *testing.T, method, url, bearer, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// latestReadings returns the cloud's latest value per metric of an agent.
func latestReadings(t *testing.T, apiURL, token, agent string) map[string]float64 {
	code, body, err := getWithToken(apiURL+"/readings/"+agent+"/latest", token)
	if err != nil || code != http.StatusOK {
		return nil
	}
	var doc map[string]any
	if json.Unmarshal([]byte(body), &doc) != nil {
		return nil
	}
	out := map[string]float64{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			name, _ := x["metric_name"].(string)
			if name == "" {
				name, _ = x["metricName"].(string)
			}
			if f, ok := toFloat(x["value"]); ok && name != "" {
				out[name] = f
				return
			}
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	return out
}

// TestPublishEndToEndMosquittoIntegration runs the whole path with every
// part real and separate: a pymodbus server's registers, `edgeplat agent`,
// Mosquitto as the cloud broker, `edgeplat serve-api`, Redis, `edgeplat
// ingest`, PostgreSQL, and the readings API. Then the cloud broker is
// stopped for EDGEPLAT_E2E_OUTAGE (2m by default) while the agent polls
// every second, the agent is SIGKILLed and restarted in the middle of it,
// and afterwards every reading of every message the agent sent is in the
// readings table exactly once. A second destination on a broker that stays
// up is the witness of what the agent sent.
func TestPublishEndToEndMosquittoIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	outage := 2 * time.Minute
	if v := os.Getenv("EDGEPLAT_E2E_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("EDGEPLAT_E2E_OUTAGE: %v", err)
		}
		outage = d
	}
	cloudBroker := coretest.PrivateMosquitto(t)
	e := startSplitE2E(t, cloudBroker, e2eEndpoint)
	dbc, agentUUID, agentURL, agent, agentReady, wit := e.dbc, e.agentUUID, e.agentURL, e.agent, e.agentReady, e.wit
	ctx := context.Background()

	// The outage.
	type sample struct {
		at    time.Duration
		count float64
		mode  string
	}
	var samples []sample
	status := func(t0 time.Time) {
		if c, m, ok := platformToSend(t, agentURL); ok {
			samples = append(samples, sample{time.Since(t0).Round(time.Second), c, m})
		}
	}
	cloudBroker.Stop()
	t0 := time.Now()
	killed := false
	for time.Since(t0) < outage {
		status(t0)
		if !killed && time.Since(t0) > outage/2 {
			agent.kill()
			agent.start()
			agentReady()
			killed = true
			t.Logf("agent SIGKILLed and restarted at %s of the outage", time.Since(t0).Round(time.Second))
		}
		time.Sleep(2 * time.Second)
	}
	cloudBroker.Start()
	end := time.Now()
	coretest.Eventually(t, 120*time.Second, "the offline queue to drain", func() bool {
		time.Sleep(500 * time.Millisecond)
		status(t0)
		s := samples[len(samples)-1]
		return s.count == 0 && s.mode == "direct"
	})
	maxCount := 0.0
	for _, s := range samples {
		maxCount = max(maxCount, s.count)
	}
	var trace strings.Builder
	for i, s := range samples {
		if i == 0 || i == len(samples)-1 || s.count != samples[i-1].count || s.mode != samples[i-1].mode {
			fmt.Fprintf(&trace, " %s:%v/%s", s.at, s.count, s.mode)
		}
	}
	t.Logf("/v1/buffer/status during and after the outage (elapsed:records/mode):%s", trace.String())
	if maxCount < outage.Seconds()/2 {
		t.Errorf("the queue peaked at %v records in a %s outage at one batch a second", maxCount, outage)
	}

	// Every reading the witness saw from the start of the outage to its
	// end is in the readings table exactly once.
	d, err := db.Open(ctx, dbc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	msgs, readings, missing := exactlyOnce(t, d, agentUUID, wit, t0.Add(-time.Second), end, 60*time.Second)
	if msgs < int(outage.Seconds()/2) {
		t.Errorf("the witness saw %d messages during a %s outage", msgs, outage)
	}
	t.Logf("outage %s: %d messages with %d readings sent during it, each in the readings table exactly once; queue peaked at %v records",
		outage, msgs, readings, maxCount)
	if len(missing) > 0 {
		t.Errorf("%d readings not exactly once in the readings table, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
}

// platformToSend reads the agent's buffer status: the records of the
// platform destination's offline queue still to send (those awaiting a
// delivery receipt were sent, docs/agent-delivery.md) and its publish
// mode; false when the agent did not answer.
func platformToSend(t *testing.T, agentURL string) (records float64, mode string, ok bool) {
	code, st := jsonDo(t, http.MethodGet, agentURL+"/v1/buffer/status", "", "")
	if code != http.StatusOK {
		return 0, "", false
	}
	records, _ = st["mqttMessageBufferCount"].(float64)
	mode, _ = st["transportPublishMode"].(string)
	ds, _ := st["destinations"].([]any)
	for _, d := range ds {
		dm, _ := d.(map[string]any)
		if dm["type"] == "platform" {
			pub, _ := dm["publish"].(map[string]any)
			a, _ := pub["awaitingReceipt"].(float64)
			records -= a
		}
	}
	return records, mode, true
}

// waitEndToEnd waits until each register's value is in the cloud's latest
// readings under <deviceName>.<data point>, and returns them.
func waitEndToEnd(t *testing.T, api, token, agentUUID string) map[string]float64 {
	t.Helper()
	coretest.Eventually(t, 60*time.Second, "every register's value in the cloud's latest readings", func() bool {
		got := latestReadings(t, api, token, agentUUID)
		for dp, want := range e2eDataPoints {
			if v, ok := got["press-1."+dp]; !ok || v != want {
				return false
			}
		}
		return true
	})
	return latestReadings(t, api, token, agentUUID)
}

// exactlyOnce checks that every reading the witness saw timed in [from,
// until) is in the readings table exactly once, with its value, retrying
// for up to wait while ingest catches up. It returns the messages and
// readings checked and the readings that are not there exactly once.
func exactlyOnce(t *testing.T, d *db.DB, agentUUID string, wit *witness, from, until time.Time, wait time.Duration) (msgs, readings int, missing []string) {
	t.Helper()
	seen := wit.snapshot()
	ctx := context.Background()
	deadline := time.Now().Add(wait)
	for {
		msgs, readings, missing = 0, 0, missing[:0]
		for id, m := range seen {
			inWindow := false
			for _, r := range m.readings {
				if !r.at.Before(from) && r.at.Before(until) {
					inWindow = true
				}
			}
			if !inWindow {
				continue
			}
			msgs++
			for _, r := range m.readings {
				readings++
				var n int
				var v float64
				// The cloud keeps a reading's time to the millisecond;
				// polls are a second apart, so the window holds one.
				err := d.SQL().QueryRowContext(ctx, `SELECT count(*), coalesce(max(value), -1) FROM readings WHERE agent_uuid = $1 AND metric_name = $2
					AND time > $3::timestamptz - interval '1 millisecond' AND time < $3::timestamptz + interval '1 millisecond'`,
					agentUUID, r.metric, r.at).Scan(&n, &v)
				if err != nil || n != 1 || v != r.value {
					missing = append(missing, fmt.Sprintf("%s %s %s: %d rows (%v)", id, r.metric, r.at.Format(time.RFC3339Nano), n, err))
				}
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	return msgs, readings, missing
}

// splitE2E is the deployment of the end-to-end tests with every part real
// and separate: a pymodbus server, `edgeplat agent` provisioned against
// `edgeplat serve-api` and `edgeplat ingest` (PostgreSQL, a private
// Redis), the cloud broker given, and a witness broker that a second
// destination of the agent publishes every message to.
type splitE2E struct {
	dbc                             config.DB
	api, token, agentUUID, agentURL string
	agent                           *proc
	agentReady                      func()
	wit                             *witness
}

// startSplitE2E starts the deployment with the endpoint JSON endpoint (a
// format with the Modbus port as its one verb) and returns once every
// data point's value is in the cloud's latest readings.
func startSplitE2E(t *testing.T, cloudBroker *coretest.MosquittoServer, endpoint string) *splitE2E {
	t.Helper()
	if err := exec.Command(systemPython, "-c", "import pymodbus").Run(); err != nil {
		coretest.Unavailable(t, "python3-pymodbus", systemPython, err)
	}
	dbc := coretest.Postgres(t)
	// A private Redis: this test's ingest takes every tenant stream it
	// finds, so on a shared server it would take (and another run's would
	// take) streams that are not its own.
	redisAddr := coretest.PrivateRedis(t).Addr()
	witnessBroker := coretest.PrivateMosquitto(t)
	bin := buildBinary(t)

	modbusPort := coretest.FreePort(t)
	mb := coretest.NewProcess(t, systemPython, pymodbusScript, "--port", strconv.Itoa(modbusPort), "--units", "1", "--registers", "20")
	mb.Ready = func() error { return coretest.Dialable(net.JoinHostPort("127.0.0.1", strconv.Itoa(modbusPort))) }
	mb.Start()

	host, port, _ := net.SplitHostPort(redisAddr)
	apiPort := coretest.FreePort(t)
	// Registrations need a licence: the self-signed one all-in-one uses.
	lic, err := licence.Demo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cloudEnv := append(os.Environ(), "LICENSE_KEY="+lic.Key, "LICENSE_PUBLIC_KEY="+lic.PublicKey,
		"DB_HOST="+dbc.Host, "DB_PORT="+strconv.Itoa(dbc.Port), "DB_NAME="+dbc.Name, "DB_USER="+dbc.User, "DB_SSL=disable",
		"STREAMSTORE_HOST="+host, "STREAMSTORE_PORT="+port,
		"MQTT_BROKER_URL="+cloudBroker.URL(), "JWT_SECRET=e2e-test-secret-of-at-least-32-bytes-long",
		"EDGEPLAT_LOG_FORMAT=json", "RECLAIM_IDLE_MS=1000")
	startProc(t, bin, "serve-api", append(cloudEnv, "PORT="+strconv.Itoa(apiPort)), "serve-api")
	startProc(t, bin, "ingest", append(cloudEnv, "PORT="+strconv.Itoa(coretest.FreePort(t))), "ingest")
	api := fmt.Sprintf("http://127.0.0.1:%d/api/v1", apiPort)
	coretest.Eventually(t, 60*time.Second, "serve-api to be healthy", func() bool {
		code, _, err := get(fmt.Sprintf("http://127.0.0.1:%d/health", apiPort))
		return err == nil && code == http.StatusOK
	})

	agentPort := coretest.FreePort(t)
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", agentPort)
	agentEnv := append(os.Environ(), "AGENT_DATA_DIR="+filepath.Join(t.TempDir(), "agent"), "DEVICE_API_PORT="+strconv.Itoa(agentPort),
		"EDGEPLAT_LOG_FORMAT=json")
	agent := startProc(t, bin, "agent", agentEnv, "agent")
	agentReady := func() {
		coretest.Eventually(t, 60*time.Second, "the agent to be ready", func() bool {
			code, _, err := get(agentURL + "/v1/readiness")
			return err == nil && code == http.StatusOK
		})
	}
	agentReady()

	// The operator's side: admin, provisioning key; the device's side:
	// provisioning, which adds the platform destination.
	postJSON(t, api+"/auth/bootstrap-admin", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusCreated)
	login := postJSON(t, api+"/auth/login", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusOK)
	token, _ := login["accessToken"].(string)
	pk := postJSON(t, api+"/provisioning/keys", token, ``, http.StatusCreated)
	out := postJSON(t, agentURL+"/v1/provision", "", fmt.Sprintf(`{"provisioningApiKey":%q,"apiEndpoint":"http://127.0.0.1:%d","deviceName":"line-1"}`, pk["key"], apiPort), http.StatusOK)
	agentUUID, _ := out["device"].(map[string]any)["uuid"].(string)

	// The witness destination, then the endpoint.
	wd := postJSON(t, agentURL+"/v1/publish/destinations", "", fmt.Sprintf(`{"name":"witness","type":"mqtt","config_json":{"url":%q}}`, witnessBroker.URL()), http.StatusCreated)
	postJSON(t, agentURL+"/v1/publish/subscriptions", "", fmt.Sprintf(`{"publish_destination_id":%v,"payload_format":"custom","compression":"msgpack+deflate","route_json":{"topic":"witness/press"}}`, wd["id"]), http.StatusCreated)
	wit := newWitness(t, witnessBroker.URL(), "witness/#")
	postJSON(t, agentURL+"/v1/endpoints", "", fmt.Sprintf(endpoint, modbusPort), http.StatusCreated)

	// End to end: each register's value under <deviceName>.<data point>.
	t.Logf("end to end: %v", waitEndToEnd(t, api, token, agentUUID))

	return &splitE2E{dbc: dbc, api: api, token: token, agentUUID: agentUUID, agentURL: agentURL, agent: agent, agentReady: agentReady, wit: wit}
}

// systemPython is Debian's interpreter, which has python3-pymodbus; the
// python3 first on PATH may be another one.
const systemPython = "/usr/bin/python3"

// TestPublishEndToEndAllInOneIntegration is the README walk-through as a
// test, on all-in-one's embedded defaults: it provisions its own agent,
// an operator adds a Modbus endpoint (a real pymodbus server), and the
// readings come out of the cloud API under <deviceName>.<data point>,
// having gone agent → embedded broker → API → in-process stream → ingest
// → SQLite.
func TestPublishEndToEndAllInOneIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one and a Modbus server")
	}
	if err := exec.Command(systemPython, "-c", "import pymodbus").Run(); err != nil {
		coretest.Unavailable(t, "python3-pymodbus", systemPython, err)
	}
	clearEnv(t)
	const email, password = "ops@example.com", "correct horse battery"
	t.Setenv("EDGEPLAT_ADMIN_EMAIL", email)
	t.Setenv("EDGEPLAT_ADMIN_PASSWORD", password)
	modbusPort := coretest.FreePort(t)
	mb := coretest.NewProcess(t, systemPython, pymodbusScript, "--port", strconv.Itoa(modbusPort), "--units", "1", "--registers", "20")
	mb.Ready = func() error { return coretest.Dialable(net.JoinHostPort("127.0.0.1", strconv.Itoa(modbusPort))) }
	mb.Start()

	p := freeAIOPorts(t)
	aio := startAIO(t, append(p.args(filepath.Join(t.TempDir(), "data")), "--auto-provision=true"))
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", p.agent)
	api := fmt.Sprintf("http://127.0.0.1:%d/api/v1", p.api)
	var agentUUID string
	coretest.Eventually(t, 60*time.Second, "all-in-one to provision its agent", func() bool {
		st := provisionStatusOf(agentURL)
		agentUUID, _ = st["uuid"].(string)
		return st["provisioned"] == true
	})
	postJSON(t, agentURL+"/v1/endpoints", "", fmt.Sprintf(e2eEndpoint, modbusPort), http.StatusCreated)
	login := postJSON(t, api+"/auth/login", "", fmt.Sprintf(`{"email":%q,"password":%q}`, email, password), http.StatusOK)
	token, _ := login["accessToken"].(string)
	t.Logf("all-in-one end to end: %v", waitEndToEnd(t, api, token, agentUUID))
	// Batches polled while the platform destination was still connecting
	// were queued; they drain (sent, and at most awaiting their receipt)
	// and the destination publishes directly.
	coretest.Eventually(t, 10*time.Second, "the platform destination direct with nothing left to send", func() bool {
		c, m, ok := platformToSend(t, agentURL)
		return ok && c == 0 && m == "direct"
	})
	aio.stop()
}
