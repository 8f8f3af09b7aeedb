package coretest

import (
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// TestPrivateMosquittoIntegration: the broker restarts on the same port,
// keeps what it held over Stop and loses what came after over Kill.
func TestPrivateMosquittoIntegration(t *testing.T) {
	s := PrivateMosquitto(t)
	setRetained(t, s, "kept")

	s.Stop()
	if err := pingMQTT(s.Addr()); err == nil {
		t.Fatal("broker still answers after Stop")
	}
	s.Stop() // stopping twice is fine
	s.Start()
	if got := retained(t, s); got != "kept" {
		t.Errorf("retained after Stop and Start = %q, want kept", got)
	}

	setRetained(t, s, "lost")
	s.Kill()
	if err := pingMQTT(s.Addr()); err == nil {
		t.Fatal("broker still answers after Kill")
	}
	s.Start()
	if got := retained(t, s); got != "kept" {
		t.Errorf("retained after Kill and Start = %q, want kept (saved by the earlier Stop)", got)
	}
}

const retainedTopic = "edgeplat-test/coretest/retained"

func connect(t *testing.T, s *MosquittoServer) paho.Client {
	t.Helper()
	// No client id: the broker assigns one to a clean session.
	c := paho.NewClient(paho.NewClientOptions().AddBroker(s.URL()).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect to %s: %v", s.URL(), tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

func setRetained(t *testing.T, s *MosquittoServer, v string) {
	t.Helper()
	c := connect(t, s)
	if tok := c.Publish(retainedTopic, 1, true, v); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
}

// retained returns the retained message of retainedTopic, "" for none.
func retained(t *testing.T, s *MosquittoServer) string {
	t.Helper()
	c := connect(t, s)
	got := make(chan string, 1)
	tok := c.Subscribe(retainedTopic, 1, func(_ paho.Client, m paho.Message) {
		select {
		case got <- string(m.Payload()):
		default:
		}
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	// A retained message comes right after the SUBACK.
	select {
	case v := <-got:
		return v
	case <-time.After(time.Second):
		return ""
	}
}
