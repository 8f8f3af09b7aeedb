package cmd

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/brokermon"
	"github.com/edgeplat/edgeplat/roles/broker"
)

// TestEmbeddedBrokerStats: all-in-one's broker monitoring reads the
// embedded broker's own counters: what a client publishes shows in
// /broker/status and /broker/stats.
func TestEmbeddedBrokerStats(t *testing.T) {
	brk, err := broker.New(broker.Options{Bind: "127.0.0.1"}, &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Health: health.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	src := embeddedBrokerStats{brk}
	if s := src.BrokerStats(); s.Values != nil {
		t.Errorf("figures of a broker not started: %+v", s)
	}
	if err := brk.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = brk.Stop(context.Background()) }()
	mon, err := brokermon.New(brokermon.Options{Source: src, PollEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mon.Run(ctx) }()
	defer func() { cancel(); <-done }()
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	brokermon.Register(e.Group("/api/v1"), brokermon.Deps{Monitor: mon, Caller: accountstest.Caller, WriteError: apitest.WriteError})

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brk.Addr()).SetClientID("embedded-stats"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	const n = 25
	for range n {
		if tok := pub.Publish("i/test/load", 1, false, []byte("x")); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	var r apitest.Reply
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = apitest.Call(t, e, "GET", "/api/v1/broker/stats", "admin-a", nil)
		tot, _ := r.Body["totals"].(map[string]any)
		if got, _ := tot["publishReceived"].(float64); r.Status == http.StatusOK && got >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.Expect(t, "stats", http.StatusOK)
	if tot, _ := r.Body["totals"].(map[string]any); tot["publishReceived"] != float64(n) {
		t.Errorf("the embedded broker's publishes received: %s, want %d", r.Raw, n)
	}
	r = apitest.Call(t, e, "GET", "/api/v1/broker/status", "admin-a", nil).Expect(t, "status", http.StatusOK)
	if r.Str("status") != "ok" || r.Str("source") != "embedded" || r.Body["clientsConnected"] != 1.0 || r.Str("version") == "" {
		t.Errorf("status from the embedded broker's counters: %s", r.Raw)
	}
	t.Logf("status %s", r.Raw)
}
