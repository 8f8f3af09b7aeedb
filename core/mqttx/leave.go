package mqttx

import (
	"context"
	"sort"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// Mosquitto 2.0 goes on routing a shared-group member's share to its
// persistent session while the member is away, however it left: a replica
// scaled down for good would keep its share of every message, queued for
// a client that never returns. A member that unsubscribes first is taken
// out of the group. Leaving is a choice, not the default, because the
// last member of a group must not leave: with nobody subscribed the
// broker discards what is published, where a kept session queues it. See
// docs/mqtt-client.md, section Leaving a shared group.

// mayLeave reports whether Stop may leave the shared group, so Run must
// leave the connection's handlers running for it.
func (c *Client) mayLeave() bool {
	return c.opts.SharedGroup != "" && c.opts.LeaveShared != nil
}

// leave asks Options.LeaveShared and, when it says so, takes cn out of
// the shared group: it unsubscribes every filter made on cn (with
// SharedGroup all of them are shared) and goes on handling and
// acknowledging what the broker had already sent or queued for the
// session until nothing came for LeaveQuiet with every handler done, or
// until its share of ctx ends. It reports whether the session may then be
// removed: only when the drain ended quiet with nothing left
// unacknowledged, since removing it would discard what it still holds.
// cn's subscribed map is read here: Run, its only writer, has returned.
func (c *Client) leave(ctx context.Context, cn *conn) bool {
	if cn.err() != nil || !c.opts.LeaveShared(ctx) {
		return false
	}
	filters := make([]string, 0, len(cn.subscribed))
	for f := range cn.subscribed {
		filters = append(filters, c.brokerFilter(f))
	}
	sort.Strings(filters)
	if len(filters) == 0 {
		return false
	}
	t0 := time.Now()
	before := cn.got.Load()
	if err := c.waitToken(ctx, cn, cn.pc.Unsubscribe(filters...)); err != nil {
		c.log.Warn("mqtt could not leave the shared group; its session keeps its share",
			"group", c.opts.SharedGroup, "err", err)
		return false
	}
	dctx, cancel := drainContext(ctx)
	defer cancel()
	quiet := c.drain(dctx, cn, t0)
	drained := cn.got.Load() - before
	unacked := cn.unacked.Load()
	remove := quiet && unacked == 0
	if remove {
		c.log.Info("mqtt left the shared group", "group", c.opts.SharedGroup, "filters", len(filters),
			"drained", drained, "took", time.Since(t0).Round(time.Millisecond))
	} else {
		// The session holds what was not handled; it stays for the
		// client id's return, out of the group all the same.
		c.log.Warn("mqtt left the shared group before its session's queue was handled; the session is kept",
			"group", c.opts.SharedGroup, "drained", drained, "unacknowledged", unacked,
			"quiet", quiet, "connection_err", cn.err(), "took", time.Since(t0).Round(time.Millisecond))
	}
	return remove
}

// drain waits until no message came on cn for LeaveQuiet since the later
// of since and the last message, with every handler done; false when ctx
// or cn ended first.
func (c *Client) drain(ctx context.Context, cn *conn, since time.Time) bool {
	quiet := c.opts.LeaveQuiet
	tick := time.NewTicker(max(quiet/10, time.Millisecond))
	defer tick.Stop()
	for {
		last := since
		if at := cn.lastAt.Load(); at > last.UnixNano() {
			last = time.Unix(0, at)
		}
		if cn.inHand.Load() == 0 && time.Since(last) >= quiet {
			return true
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		case <-cn.ended:
			return false
		}
	}
}

// drainContext bounds the drain to three quarters of what is left of
// ctx, so the queue flush, the DISCONNECT and the session's removal keep
// some of the grace period.
func drainContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, time.Now().Add(time.Until(dl)*3/4))
}

// removeSession connects once under the client id with a clean session
// and disconnects, so the broker keeps nothing for a member that has left:
// no subscription, no queue. MQTT 3.1.1 removes a session this way only;
// a failure is logged, and the session, out of the group, holds nothing
// new.
func (c *Client) removeSession(ctx context.Context) {
	if c.opts.CleanSession {
		return // the broker removed it with the connection
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	cn := &conn{c: c, ctx: hctx, cancel: cancel, closing: make(chan struct{}), ended: make(chan struct{})}
	po := c.pahoOptions(ctx, cn)
	po.SetCleanSession(true)
	po.WillEnabled = false // no will from a connection made only to end the session
	// A clean session has no subscription, so nothing should come; were
	// anything to, this connection has no workers to hand it to.
	po.SetDefaultPublishHandler(func(paho.Client, paho.Message) {})
	pc := paho.NewClient(po)
	tok := pc.Connect()
	<-tok.Done() // bounded: the dial follows ctx, the handshake ConnectTimeout
	cn.unhookDial()
	if err := tok.Error(); err != nil {
		c.log.Warn("mqtt could not remove its session after leaving the shared group", "err", err)
		return
	}
	pc.Disconnect(uint(c.quiesce(ctx).Milliseconds()))
	c.log.Info("mqtt session removed", "client_id", c.opts.ClientID)
}
