package dest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

const waitFor = 15 * time.Second

// startTransport builds and starts a destination with fast reconnects;
// it is stopped when the test ends.
func startTransport(t *testing.T, typ, config string, env Env) Transport {
	t.Helper()
	tr, err := New(store.Destination{ID: 42, Type: typ, Config: json.RawMessage(config)}, env)
	if err != nil {
		t.Fatal(err)
	}
	switch x := tr.(type) {
	case *mqttTransport:
		x.tune = func(o *mqttx.Options) {
			o.BackoffBase, o.BackoffMax = 50*time.Millisecond, 400*time.Millisecond
			o.ConnectTimeout, o.AckTimeout = 3*time.Second, 5*time.Second
		}
	case *tsdbTransport:
		x.backoffBase, x.backoffMax = 50*time.Millisecond, 400*time.Millisecond
	}
	if err := tr.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tr.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return tr
}

func waitConnected(t *testing.T, tr Transport, want bool) {
	t.Helper()
	coretest.Eventually(t, waitFor, fmt.Sprintf("connected=%v (status %+v)", want, tr.Status()), func() bool { return tr.Connected() == want })
}

// subscriber is a plain paho client that records what arrives.
type subscriber struct {
	c  paho.Client
	ch chan paho.Message
}

func subscribe(t *testing.T, brokerURL, user, pass string, tlsCfg *tls.Config, filter string) *subscriber {
	t.Helper()
	s := &subscriber{ch: make(chan paho.Message, 100)}
	o := paho.NewClientOptions().AddBroker(brokerURL).SetClientID(fmt.Sprintf("observer-%d", time.Now().UnixNano())).
		SetUsername(user).SetPassword(pass).SetAutoReconnect(false).SetCleanSession(true).SetConnectTimeout(5 * time.Second)
	if tlsCfg != nil {
		o.SetTLSConfig(tlsCfg)
	}
	s.c = paho.NewClient(o)
	if tok := s.c.Connect(); !tok.WaitTimeout(waitFor) || tok.Error() != nil {
		t.Fatalf("subscriber connect: %v", tok.Error())
	}
	t.Cleanup(func() { s.c.Disconnect(100) })
	if tok := s.c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) { s.ch <- m }); !tok.WaitTimeout(waitFor) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	return s
}

// expect checks that the next messages are msgs, byte for byte, in order.
func (s *subscriber) expect(t *testing.T, msgs []Message) {
	t.Helper()
	for _, want := range msgs {
		select {
		case m := <-s.ch:
			if m.Topic() != want.Topic || string(m.Payload()) != string(want.Payload) {
				t.Fatalf("got %s %q, want %s %q", m.Topic(), m.Payload(), want.Topic, want.Payload)
			}
		case <-time.After(waitFor):
			t.Fatalf("no message on %s", want.Topic)
		}
	}
}

func sendOK(t *testing.T, tr Transport, msgs []Message) {
	t.Helper()
	for i, err := range tr.Send(t.Context(), msgs) {
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// payloads are binary on purpose: the hubs must pass bytes untouched.
func testMessages(topic string) []Message {
	return []Message{
		{Topic: topic, Payload: []byte(`{"msgId":"v2_Ab3dEf9h_1"}`)},
		{Topic: topic, Payload: []byte{0x78, 0x9c, 0x00, 0xff, 0x0a}},
		{Topic: topic, Payload: []byte(`{"msgId":"v2_Ab3dEf9h_3"}`)},
	}
}

// TestHubAIntegration: AWS IoT Core is mutual TLS with the thing's
// certificate; a certificate of another CA leaves it not connected.
func TestHubAIntegration(t *testing.T) {
	pki := newPKI(t)
	m := startTLSMosquitto(t, pki, true, nil)
	cert, key := pki.issue(t, "pump-1", false)
	ocert, okey := pki.issue(t, "observer", false)
	sub := subscribe(t, fmt.Sprintf("ssl://127.0.0.1:%d", m.port), "", "", pki.clientTLS(t, ocert, okey), "#")

	cfg := fmt.Sprintf(`{"endpoint":"127.0.0.1","port":%d,"thingName":"pump-1","certFile":%q,"keyFile":%q,"caFile":%q}`, m.port, cert, key, pki.CAFile)
	tr := startTransport(t, TypeHubA, cfg, Env{})
	waitConnected(t, tr, true)
	topic := tr.Topic("", "line/1")
	if topic != "dt/edgeplat/pump-1/telemetry" {
		t.Fatalf("topic %q", topic)
	}
	msgs := testMessages(topic)
	sendOK(t, tr, msgs)
	sub.expect(t, msgs)

	t.Run("certificate missing at start", func(t *testing.T) {
		// A key that cannot be read when the destination starts (a volume
		// mounted later, a rotation) leaves it not connected and retrying,
		// and it connects once the file is back.
		moved := key + ".away"
		if err := os.Rename(key, moved); err != nil {
			t.Fatal(err)
		}
		tr, err := New(store.Destination{ID: 43, Type: TypeHubA, Config: json.RawMessage(cfg)}, Env{})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Start(t.Context()); err != nil {
			t.Fatalf("start with an unreadable key: %v, want a retry", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tr.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
		})
		if st := tr.Status(); st.Connected || !strings.Contains(st.LastError, "key") {
			t.Fatalf("status with the key away: %+v", st)
		}
		if errs := tr.Send(t.Context(), msgs[:1]); !errors.Is(errs[0], ErrNotConnected) {
			t.Fatalf("send before the start succeeded: %v", errs[0])
		}
		if err := os.Rename(moved, key); err != nil {
			t.Fatal(err)
		}
		waitConnected(t, tr, true)
	})

	t.Run("untrusted client certificate", func(t *testing.T) {
		other := newPKI(t)
		bcert, bkey := other.issue(t, "pump-1", false)
		cfg := fmt.Sprintf(`{"endpoint":"127.0.0.1","port":%d,"thingName":"pump-1","certFile":%q,"keyFile":%q,"caFile":%q}`, m.port, bcert, bkey, pki.CAFile)
		bad := startTransport(t, TypeHubA, cfg, Env{})
		coretest.Eventually(t, waitFor, "a connection error", func() bool { return bad.Status().LastError != "" })
		if bad.Connected() {
			t.Fatal("connected with an untrusted certificate")
		}
		t.Logf("last error: %s", bad.Status().LastError)
		for _, err := range bad.Send(t.Context(), msgs[:1]) {
			if !errors.Is(err, ErrNotConnected) {
				t.Fatalf("send: %v, want ErrNotConnected", err)
			}
		}
	})
}

// TestHubBIntegration: the broker's password file holds exactly the SAS
// token the transport makes at the fixed clock, so a connection proves
// the username, client id and token framing; a wrong key is refused.
func TestHubBIntegration(t *testing.T) {
	pki := newPKI(t)
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	now := func() time.Time { return fixedNow }
	want := hubBConfig{HostName: "127.0.0.1", DeviceID: "dev-1", SharedAccessKey: key}.connection(0, fixedNow)
	m := startTLSMosquitto(t, pki, false, map[string]string{
		"127.0.0.1/dev-1/?api-version=2021-04-12": want.Password,
		"observer": "observer-pw",
	})
	sub := subscribe(t, fmt.Sprintf("ssl://127.0.0.1:%d", m.port), "observer", "observer-pw", pki.clientTLS(t, "", ""), "#")

	cfg := fmt.Sprintf(`{"hostName":"127.0.0.1","port":%d,"deviceId":"dev-1","sharedAccessKey":%q,"caFile":%q}`, m.port, key, pki.CAFile)
	tr := startTransport(t, TypeHubB, cfg, Env{Now: now})
	waitConnected(t, tr, true)
	if got := tr.Status().CredentialsExpire; !got.Equal(fixedNow.Add(time.Hour)) {
		t.Errorf("credentials expire %s", got)
	}
	msgs := testMessages(tr.Topic("", "line/1"))
	if msgs[0].Topic != "devices/dev-1/messages/events/" {
		t.Fatalf("topic %q", msgs[0].Topic)
	}
	sendOK(t, tr, msgs)
	sub.expect(t, msgs)

	t.Run("credential renewal", func(t *testing.T) {
		// Renewing replaces the client; sends work again afterwards.
		x := tr.(*mqttTransport)
		old := x.run()
		x.renew(t.Context(), old)
		if x.run() == old {
			t.Fatal("client not replaced")
		}
		waitConnected(t, tr, true)
		sendOK(t, tr, msgs[:1])
		sub.expect(t, msgs[:1])
	})

	t.Run("probe", func(t *testing.T) {
		// POST /v1/publish/destinations/test's check: the good settings
		// connect; a wrong key answers the broker's refusal at once.
		if msg, err := Probe(t.Context(), TypeHubB, json.RawMessage(cfg), Env{Now: now}); err != nil || msg == "" {
			t.Fatalf("probe of good settings: %q %v", msg, err)
		}
		bad := fmt.Sprintf(`{"hostName":"127.0.0.1","port":%d,"deviceId":"dev-1","sharedAccessKey":"d3Jvbmc=","caFile":%q}`, m.port, pki.CAFile)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, err := Probe(ctx, TypeHubB, json.RawMessage(bad), Env{Now: now}); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authori") {
			t.Fatalf("probe with a wrong key: %v, want the broker's refusal", err)
		}
	})

	t.Run("wrong key", func(t *testing.T) {
		cfg := fmt.Sprintf(`{"hostName":"127.0.0.1","port":%d,"deviceId":"dev-1","sharedAccessKey":"d3Jvbmc=","caFile":%q}`, m.port, pki.CAFile)
		bad := startTransport(t, TypeHubB, cfg, Env{Now: now})
		coretest.Eventually(t, waitFor, "a connection error", func() bool { return bad.Status().LastError != "" })
		if s := bad.Status(); s.Connected || !strings.Contains(strings.ToLower(s.LastError), "authori") {
			t.Fatalf("status %+v, want not connected and not authorised", s)
		}
	})
}

// TestHubCIntegration: the same proof for Alibaba's signed password and
// its client id with the securemode parameters.
func TestHubCIntegration(t *testing.T) {
	pki := newPKI(t)
	c := hubCConfig{ProductKey: "a1B2c3", DeviceName: "pump-1", DeviceSecret: "s3cr3t", Host: "127.0.0.1"}
	want := c.connection(0, fixedNow)
	m := startTLSMosquitto(t, pki, false, map[string]string{"pump-1&a1B2c3": want.Password, "observer": "observer-pw"})
	sub := subscribe(t, fmt.Sprintf("ssl://127.0.0.1:%d", m.port), "observer", "observer-pw", pki.clientTLS(t, "", ""), "#")

	cfg := fmt.Sprintf(`{"productKey":"a1B2c3","deviceName":"pump-1","deviceSecret":"s3cr3t","host":"127.0.0.1","port":%d,"caFile":%q}`, m.port, pki.CAFile)
	tr := startTransport(t, TypeHubC, cfg, Env{Now: func() time.Time { return fixedNow }})
	waitConnected(t, tr, true)
	msgs := testMessages(tr.Topic("", "line/1"))
	if msgs[0].Topic != "/a1B2c3/pump-1/user/update" {
		t.Fatalf("topic %q", msgs[0].Topic)
	}
	sendOK(t, tr, msgs)
	sub.expect(t, msgs)

	t.Run("wrong secret", func(t *testing.T) {
		cfg := fmt.Sprintf(`{"productKey":"a1B2c3","deviceName":"pump-1","deviceSecret":"wrong","host":"127.0.0.1","port":%d,"caFile":%q}`, m.port, pki.CAFile)
		bad := startTransport(t, TypeHubC, cfg, Env{Now: func() time.Time { return fixedNow }})
		coretest.Eventually(t, waitFor, "a connection error", func() bool { return bad.Status().LastError != "" })
		if s := bad.Status(); s.Connected || !strings.Contains(strings.ToLower(s.LastError), "authori") {
			t.Fatalf("status %+v, want not connected and not authorised", s)
		}
	})
}

// TestMQTTOutageIntegration: generic mqtt over plain TCP delivers to the
// route topic; while the broker is down sends fail as not connected, and
// when it is back Changes fires and sends succeed again.
func TestMQTTOutageIntegration(t *testing.T) {
	b := coretest.PrivateMosquitto(t)
	tr := startTransport(t, TypeMQTT, fmt.Sprintf(`{"url":%q}`, b.URL()), Env{})
	waitConnected(t, tr, true)
	sub := subscribe(t, b.URL(), "", "", nil, "plant/#")
	msgs := testMessages(tr.Topic("plant/{mqttTopic}", "line/1"))
	if msgs[0].Topic != "plant/line/1" {
		t.Fatalf("topic %q", msgs[0].Topic)
	}
	sendOK(t, tr, msgs)
	sub.expect(t, msgs)

	drain(tr.Changes())
	b.Kill()
	waitConnected(t, tr, false)
	for i, err := range tr.Send(t.Context(), msgs) {
		if !errors.Is(err, ErrNotConnected) || IsRejected(err) {
			t.Fatalf("send %d while down: %v, want ErrNotConnected", i, err)
		}
	}
	drain(tr.Changes())
	b.Start()
	select {
	case <-tr.Changes():
	case <-time.After(waitFor):
		t.Fatal("no change signalled after the broker came back")
	}
	waitConnected(t, tr, true)
	sub2 := subscribe(t, b.URL(), "", "", nil, "plant/#")
	sendOK(t, tr, msgs)
	sub2.expect(t, msgs)

	t.Run("invalid topic is rejected", func(t *testing.T) {
		errs := tr.Send(t.Context(), []Message{{Topic: "bad/#", Payload: []byte("x")}})
		if !IsRejected(errs[0]) {
			t.Fatalf("send to a wildcard topic: %v, want a rejection", errs[0])
		}
	})
}

// TestPlatformIntegration: with credentials the platform destination
// connects and publishes under the device's topic prefix.
func TestPlatformIntegration(t *testing.T) {
	b := coretest.PrivateMosquitto(t)
	env := Env{Platform: PlatformCredentials{BrokerURL: b.URL(), Username: "agent", Password: "pw", ClientID: "agent-publish", TopicPrefix: "i/TTTTTTTTTTTTTTTTTTTTTT/a/AAAAAAAAAAAAAAAAAAAAAA"}}
	tr := startTransport(t, TypePlatform, "", env)
	waitConnected(t, tr, true)
	sub := subscribe(t, b.URL(), "", "", nil, "i/#")
	msgs := testMessages(tr.Topic("", "line/1"))
	if msgs[0].Topic != "i/TTTTTTTTTTTTTTTTTTTTTT/a/AAAAAAAAAAAAAAAAAAAAAA/endpoints/line/1" {
		t.Fatalf("topic %q", msgs[0].Topic)
	}
	sendOK(t, tr, msgs)
	sub.expect(t, msgs)
}

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// TestHubPayloadLimit: a message over a hub's size limit is refused
// before it is written (the hub would drop the connection over it, which
// would look like an outage), and the messages around it still go.
func TestHubPayloadLimit(t *testing.T) {
	pki := newPKI(t)
	m := startTLSMosquitto(t, pki, true, nil)
	cert, key := pki.issue(t, "pump-1", false)
	cfg := fmt.Sprintf(`{"endpoint":"127.0.0.1","port":%d,"thingName":"pump-1","certFile":%q,"keyFile":%q,"caFile":%q}`, m.port, cert, key, pki.CAFile)
	tr := startTransport(t, TypeHubA, cfg, Env{})
	waitConnected(t, tr, true)
	topic := tr.Topic("", "line/1")
	errs := tr.Send(t.Context(), []Message{
		{Topic: topic, Payload: []byte("small")},
		{Topic: topic, Payload: make([]byte, HubAMaxPayload+1)},
		{Topic: topic, Payload: make([]byte, HubAMaxPayload)},
	})
	if errs[0] != nil || !IsRejected(errs[1]) || errs[2] != nil {
		t.Fatalf("sends: %v", errs)
	}
	if !tr.Connected() {
		t.Fatal("the oversized message cost the connection")
	}
}
