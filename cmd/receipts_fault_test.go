package cmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
)

// receiptsFaultEndpoint is e2eEndpoint polled ten times a second, so a
// short outage leaves a backlog to flush.
var receiptsFaultEndpoint = strings.Replace(e2eEndpoint, `"poll_interval":1000`, `"poll_interval":100`, 1)

// TestReceiptsBrokerKillIntegration is the fault delivery receipts exist
// for (docs/agent-delivery.md, section Delivery receipts): a cloud
// Mosquitto without persistence acknowledges messages it then loses when
// it is SIGKILLed, or that no subscriber was there to take when it came
// back (the agent reconnected before serve-api resubscribed). The agent
// builds a backlog while the broker is away, the broker comes back and is
// SIGKILLed for 15 s while the agent flushes, and afterwards every
// reading the agent produced meanwhile (seen by the witness broker) is in
// the readings table exactly once: the records the broker forgot stayed
// on the agent, awaiting a receipt, and were sent again.
func TestReceiptsBrokerKillIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	cloudBroker := coretest.PrivateMosquittoWith(t, "persistence false\n")
	e := startSplitE2E(t, cloudBroker, receiptsFaultEndpoint)
	toSend := func() float64 {
		c, _, ok := platformToSend(t, e.agentURL)
		if !ok {
			return -1
		}
		return c
	}

	t0 := time.Now()
	cloudBroker.Stop()
	const backlog = 50
	coretest.Eventually(t, 60*time.Second, "a backlog to flush", func() bool { return toSend() >= backlog })
	cloudBroker.Start()
	coretest.Eventually(t, 60*time.Second, "the flush under way", func() bool {
		c := toSend()
		return c >= 0 && c < backlog
	})
	cloudBroker.Kill()
	time.Sleep(15 * time.Second)
	cloudBroker.Start()
	end := time.Now()

	d, err := db.Open(context.Background(), e.dbc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// What the broker forgot is sent again once its receipt wait (30 s)
	// is over without a receipt.
	msgs, readings, missing := exactlyOnce(t, d, e.agentUUID, e.wit, t0, end, 120*time.Second)
	t.Logf("%d messages with %d readings sent from the backlog to the restart, %d not exactly once in the readings table", msgs, readings, len(missing))
	if msgs < backlog {
		t.Errorf("the witness saw %d messages, want at least the backlog of %d", msgs, backlog)
	}
	if len(missing) > 0 {
		t.Errorf("%d readings not exactly once in the readings table, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
}
