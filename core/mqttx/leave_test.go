package mqttx

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestLeaveSharedIntegration runs two members of a shared group on a
// private Mosquitto and stops the first while messages are published. A
// member whose LeaveShared says so leaves the group: every message is
// handled exactly once by one of the two, with the first gone. Without
// the hook, or with it answering false, the first member's session keeps
// its share, which reaches only that client id on its return: the same
// check without the return would never see every message.
func TestLeaveSharedIntegration(t *testing.T) {
	broker := coretest.PrivateMosquitto(t)
	yes := func(context.Context) bool { return true }
	no := func(context.Context) bool { return false }
	for _, tc := range []struct {
		name  string
		leave func(context.Context) bool
		// kept: the first member's session keeps its share, handed to it
		// when it comes back under its client id.
		kept bool
	}{
		{"leaves", yes, false},
		{"hook false keeps the share", no, true},
		{"no hook keeps the share", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testLeaveShared(t, broker.URL(), tc.leave, tc.kept)
		})
	}
}

func testLeaveShared(t *testing.T, brokerURL string, leave func(context.Context) bool, kept bool) {
	group := uniqueID("g")
	base := uniqueID("edgeplat-test/leave")
	filter := base + "/+/data"
	firstID := uniqueID("leaver")

	var mu sync.Mutex
	seen := map[string]int{}     // payload → deliveries
	byMember := map[string]int{} // member → messages
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return byMember[name]
	}
	member := func(name, id string, leave func(context.Context) bool, delay time.Duration) (stop func()) {
		o := testOptions(t, brokerURL)
		o.Name, o.ClientID, o.SharedGroup, o.LeaveShared = name, id, group, leave
		o.LeaveQuiet = 300 * time.Millisecond
		c := newClient(t, o)
		err := c.Subscribe(filter, 1, func(_ context.Context, m Message) error {
			// A handler slower than the publisher, so the broker holds a
			// backlog for the session when it leaves.
			time.Sleep(delay)
			mu.Lock()
			defer mu.Unlock()
			seen[string(m.Payload)]++
			byMember[name]++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		stop = runFor(t, c, 30*time.Second)
		waitState(t, c, StateConnected)
		return stop
	}
	stopFirst := member("first", firstID, leave, 2*time.Millisecond)
	member("second", uniqueID("stayer"), nil, 0)

	pub := newClient(t, asPublisher(testOptions(t, brokerURL), true))
	start(t, pub)
	waitState(t, pub, StateConnected)
	// Publish until the first member has stopped, and after that another
	// batch that only the group's remaining member (or, kept, the first's
	// session) may receive.
	const after = 300
	stopped := make(chan struct{})
	published := make(chan int, 1)
	go func() {
		i, left := 0, -1
		defer func() { published <- i }()
		for ; left != 0 && i < 100000; i++ {
			if left < 0 {
				select {
				case <-stopped:
					left = after
				default:
				}
			} else {
				left--
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			err := pub.Publish(ctx, fmt.Sprintf("%s/dev%d/data", base, i%7), 1, false, []byte(fmt.Sprintf("m%06d", i)))
			cancel()
			if err != nil {
				t.Errorf("publish %d: %v", i, err)
				return
			}
		}
	}()
	// Stop the first member mid-stream, with publishing going on.
	coretest.Eventually(t, waitFor, "the first member handles some messages", func() bool { return count("first") >= 50 })
	stopFirst()
	close(stopped)
	n := <-published
	if t.Failed() {
		return
	}
	if kept {
		member("first-returned", firstID, nil, 0)
	}
	coretest.Eventually(t, 30*time.Second, fmt.Sprintf("%d messages across the group", n), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	mu.Lock()
	defer mu.Unlock()
	for p, k := range seen {
		if k != 1 {
			t.Errorf("%s handled %d times", p, k)
		}
	}
	if kept && byMember["first-returned"] == 0 {
		t.Errorf("the returning member got nothing: its session kept no share (%v)", byMember)
	}
	if byMember["first"] == 0 || byMember["second"] == 0 {
		t.Errorf("split %v, want both members to handle some", byMember)
	}
	t.Logf("handled by member: %v", byMember)
}
