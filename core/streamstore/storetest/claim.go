package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
)

// idle is the AutoClaim minimum idle time the tests use: small, and only
// ever waited for with a bound, never asserted.
const idle = 50 * time.Millisecond

func (e *env) pending(stream, group string) []streamstore.PendingEntry {
	e.t.Helper()
	p, err := e.st.PendingEntries(e.ctx, stream, group, 1000)
	if err != nil {
		e.t.Fatalf("PendingEntries: %v", err)
	}
	return p
}

func testPendingEntriesAndDeliveries(t *testing.T, e *env) {
	s := e.name("s")
	added := e.add(s, 4)
	e.ensureGroup(s, "g", "0")
	e.read(s, "g", "c1", 2)
	e.read(s, "g", "c2", 2)
	e.ack(s, "g", added[1])
	p := e.pending(s, "g")
	var got []string
	for _, pe := range p {
		got = append(got, pe.ID)
		if pe.Deliveries != 1 || pe.Idle < 0 {
			t.Errorf("pending %+v: want 1 delivery and a non-negative idle time", pe)
		}
	}
	if want := []string{added[0], added[2], added[3]}; !slices.Equal(got, want) {
		t.Errorf("pending ids = %v, want oldest first %v", got, want)
	}
	if first, err := e.st.PendingEntries(e.ctx, s, "g", 1); err != nil || len(first) != 1 || first[0].ID != added[0] {
		t.Errorf("PendingEntries(count 1) = %v, %v; want the oldest", first, err)
	}
	// Each claim is one more delivery.
	for round := 2; round <= 3; round++ {
		// minIdle 0 claims whatever is pending, however recent.
		claimed, _, err := e.st.AutoClaim(e.ctx, s, "g", "c3", 0, "0-0", 10)
		if err != nil || len(claimed) != 3 {
			t.Fatalf("AutoClaim = %v, %v; want all 3 pending", ids(claimed), err)
		}
		for _, pe := range e.pending(s, "g") {
			if pe.Deliveries != int64(round) || pe.Consumer != "c3" {
				t.Errorf("after claim %d: %+v, want %d deliveries to c3", round-1, pe, round)
			}
		}
	}
}

func testAutoClaimAfterIdle(t *testing.T, e *env) {
	s := e.name("s")
	added := e.add(s, 3)
	e.ensureGroup(s, "g", "0")
	e.read(s, "g", "crashed", 3)
	e.ack(s, "g", added[1])

	// The crashed consumer never acknowledges; once its entries are idle for
	// minIdle another consumer takes them over.
	var claimed []streamstore.Entry
	coretest.Eventually(t, wait, "idle entries to be claimed", func() bool {
		c, next, err := e.st.AutoClaim(e.ctx, s, "g", "rescuer", idle, "0-0", 10)
		if err != nil {
			t.Fatalf("AutoClaim: %v", err)
		}
		if next != "0-0" {
			t.Fatalf("AutoClaim over the whole PEL returned cursor %s, want 0-0", next)
		}
		claimed = append(claimed, c...)
		return len(claimed) == 2
	})
	if want := []string{added[0], added[2]}; !slices.Equal(ids(claimed), want) {
		t.Fatalf("claimed %v, want %v", ids(claimed), want)
	}
	if claimed[0].Values["n"] != "0" {
		t.Errorf("claimed entry values = %v", claimed[0].Values)
	}
	for _, pe := range e.pending(s, "g") {
		if pe.Consumer != "rescuer" || pe.Deliveries != 2 {
			t.Errorf("after AutoClaim: %+v, want rescuer with 2 deliveries", pe)
		}
	}
	// Claiming reset the idle time: with a long minIdle nothing is idle
	// enough now (an hour cannot pass within this test).
	if c, _, err := e.st.AutoClaim(e.ctx, s, "g", "other", time.Hour, "0-0", 10); err != nil || len(c) != 0 {
		t.Errorf("AutoClaim(minIdle 1h) = %v, %v; want nothing", ids(c), err)
	}
	if n := e.ack(s, "g", ids(claimed)...); n != 2 {
		t.Errorf("the rescuer acknowledged %d, want 2", n)
	}
}

func testAutoClaimCursor(t *testing.T, e *env) {
	s := e.name("s")
	added := e.add(s, 5)
	e.ensureGroup(s, "g", "0")
	e.read(s, "g", "c1", 5)
	var got []string
	cursor := "0-0"
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatalf("cursor never returned to 0-0; got %v", got)
		}
		c, next, err := e.st.AutoClaim(e.ctx, s, "g", "c2", 0, cursor, 2)
		if err != nil {
			t.Fatalf("AutoClaim(%s): %v", cursor, err)
		}
		if len(c) > 2 {
			t.Fatalf("AutoClaim(count 2) returned %d", len(c))
		}
		got = append(got, ids(c)...)
		if next == "0-0" {
			break
		}
		if len(c) == 0 || next == cursor {
			t.Fatalf("cursor %s -> %s made no progress", cursor, next)
		}
		cursor = next
	}
	if !slices.Equal(got, added) {
		t.Errorf("paging AutoClaim returned %v, want %v", got, added)
	}
	// An exclusive start skips the given id.
	c, _, err := e.st.AutoClaim(e.ctx, s, "g", "c3", 0, "("+added[3], 10)
	if err != nil || !slices.Equal(ids(c), added[4:]) {
		t.Errorf(`AutoClaim from "(%s)" = %v, %v; want %v`, added[3], ids(c), err, added[4:])
	}
}

func testAutoClaimDropsTrimmed(t *testing.T, e *env) {
	s := e.name("s")
	added := e.add(s, 3)
	e.ensureGroup(s, "g", "0")
	e.read(s, "g", "c1", 3)
	// Trimming past pending entries is what SafeTrimID prevents; done by
	// hand here, AutoClaim must cope: the PEL forgets the missing entries.
	if n, err := e.st.TrimMinID(e.ctx, s, added[2]); n != 2 || err != nil {
		t.Fatalf("TrimMinID = %d, %v", n, err)
	}
	if info := e.group(s, "g"); info.Pending != 3 {
		t.Errorf("trimming changed the PEL: Pending = %d, want 3", info.Pending)
	}
	c, next, err := e.st.AutoClaim(e.ctx, s, "g", "c2", 0, "0-0", 10)
	if err != nil || next != "0-0" || !slices.Equal(ids(c), added[2:]) {
		t.Errorf("AutoClaim = %v, %s, %v; want only the surviving %v", ids(c), next, err, added[2:])
	}
	p := e.pending(s, "g")
	if len(p) != 1 || p[0].ID != added[2] || p[0].Consumer != "c2" {
		t.Errorf("PEL after AutoClaim = %+v, want only %s held by c2", p, added[2])
	}
}

func testGroupInfo(t *testing.T, e *env) {
	s := e.name("s")
	added := e.add(s, 5)
	e.ensureGroup(s, "g", "0")
	checkLag := func(info streamstore.GroupInfo, want int64) {
		t.Helper()
		if info.Lag != want && info.Lag != -1 {
			t.Errorf("Lag = %d, want %d (or -1 for unknown)", info.Lag, want)
		}
	}
	info := e.group(s, "g")
	if info.Name != "g" || info.LastDeliveredID != "0-0" || info.Pending != 0 {
		t.Errorf("new group = %+v", info)
	}
	checkLag(info, 5)
	e.read(s, "g", "c", 2)
	e.ack(s, "g", added[0])
	info = e.group(s, "g")
	if info.LastDeliveredID != added[1] || info.Pending != 1 {
		t.Errorf("after reading 2 and acknowledging 1: %+v", info)
	}
	checkLag(info, 3)
	e.read(s, "g", "c", 10)
	checkLag(e.group(s, "g"), 0)
	e.ensureGroup(s, "g2", "0")
	if info := e.group(s, "g2"); info.Name != "g2" || info.LastDeliveredID != "0-0" {
		t.Errorf("Group picked the wrong group: %+v", info)
	}
}
