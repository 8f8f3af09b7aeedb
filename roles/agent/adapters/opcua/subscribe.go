package opcua

import (
	"context"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"
)

// stateCheckEvery is how often Listen looks at gopcua's connection state.
// It is a memory read, so a short period costs nothing and lets a server
// restart surface quickly.
const stateCheckEvery = 200 * time.Millisecond

// Listen delivers the data points through monitored items of one
// subscription. It returns ErrPollOnly when the endpoint does not
// subscribe, nil when ctx ends and an error when the session is lost.
func (a *Adapter) Listen(ctx context.Context, emit func([]adapters.Reading)) error {
	if !a.conn.Subscribe {
		return adapters.ErrPollOnly
	}
	c, err := a.session()
	if err != nil {
		return err
	}

	// The publish loop of gopcua blocks on this channel until Close, so it
	// is buffered to keep notifications flowing while emit runs.
	notifs := make(chan *opcua.PublishNotificationData, 16)
	interval := time.Duration(a.conn.PublishingIntervalMS) * time.Millisecond
	sctx, cancel := context.WithTimeout(ctx, a.timeout())
	sub, err := c.Subscribe(sctx, &opcua.SubscriptionParameters{Interval: interval}, notifs)
	cancel()
	if err != nil {
		return a.listenError(ctx, "create subscription", err)
	}
	defer func() {
		// Best effort: on a lost session the server has dropped it anyway.
		cctx, cancel := context.WithTimeout(context.Background(), a.timeout())
		defer cancel()
		if err := sub.Cancel(cctx); err != nil {
			a.log.Debug("cancel subscription", "err", err)
		}
	}()

	// The client handle of an item is the index of its point.
	var items []*ua.MonitoredItemCreateRequest
	var at []int
	for i := range a.points {
		if a.nodes[i] == nil {
			continue
		}
		item := opcua.NewMonitoredItemCreateRequestWithDefaults(a.nodes[i], ua.AttributeIDValue, uint32(i))
		item.RequestedParameters.SamplingInterval = float64(a.conn.SamplingIntervalMS)
		items = append(items, item)
		at = append(at, i)
	}
	res := &ua.CreateMonitoredItemsResponse{}
	if len(items) > 0 {
		mctx, cancel := context.WithTimeout(ctx, a.timeout())
		res, err = sub.Monitor(mctx, ua.TimestampsToReturnBoth, items...)
		cancel()
		if err == nil && res.ResponseHeader != nil && !isGood(res.ResponseHeader.ServiceResult) {
			err = res.ResponseHeader.ServiceResult
		}
		if err != nil {
			return a.listenError(ctx, "create monitored items", err)
		}
	}
	// A node the server refuses to monitor (unknown id, no access) would
	// otherwise never report; it gets one BAD reading with the reason.
	now := time.Now().UTC()
	refused := a.unresolved(now)
	for k, r := range res.Results {
		if k < len(at) && r != nil && !isGood(r.StatusCode) {
			p := a.points[at[k]]
			a.log.Warn("node not monitored", "node", p.Register, "status", r.StatusCode.Error())
			refused = append(refused, a.reading(p, &ua.DataValue{Status: r.StatusCode}, now))
		}
	}
	if len(refused) > 0 {
		emit(refused)
	}

	check := time.NewTicker(stateCheckEvery)
	defer check.Stop()
	// A network that silently drops packets shows no channel error, and
	// gopcua ignores publish time-outs, so a cheap read proves the session
	// is alive from time to time.
	heartbeat := time.NewTicker(max(a.timeout(), 2*interval))
	defer heartbeat.Stop()

	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-notifs:
			if n.Error != nil {
				return a.listenError(ctx, "subscription", n.Error)
			}
			if dc, ok := n.Value.(*ua.DataChangeNotification); ok {
				if readings := a.dataChange(dc); len(readings) > 0 {
					a.stats.noteNotifications(len(readings))
					emit(readings)
				}
			}
		case <-check.C:
			if _, err := a.session(); err != nil {
				return a.listenError(ctx, "session", err)
			}
		case <-heartbeat.C:
			if err := a.heartbeat(ctx, c); err != nil {
				return a.listenError(ctx, "heartbeat read", err)
			}
		}
	}
}

func (a *Adapter) dataChange(dc *ua.DataChangeNotification) []adapters.Reading {
	now := time.Now().UTC()
	out := make([]adapters.Reading, 0, len(dc.MonitoredItems))
	for _, item := range dc.MonitoredItems {
		if item == nil || int(item.ClientHandle) >= len(a.points) {
			continue
		}
		out = append(out, a.reading(a.points[item.ClientHandle], item.Value, now))
	}
	return out
}

// heartbeat reads the server's state variable.
func (a *Adapter) heartbeat(ctx context.Context, c *opcua.Client) error {
	hctx, cancel := context.WithTimeout(ctx, a.timeout())
	defer cancel()
	res, err := c.Read(hctx, &ua.ReadRequest{
		NodesToRead: []*ua.ReadValueID{{NodeID: ua.NewNumericNodeID(0, id.Server_ServerStatus_State), AttributeID: ua.AttributeIDValue}},
	})
	switch {
	case err != nil:
		return err
	case res.ResponseHeader != nil && !isGood(res.ResponseHeader.ServiceResult):
		return res.ResponseHeader.ServiceResult
	case len(res.Results) == 1 && res.Results[0] != nil && res.Results[0].Value != nil:
		// ServerState 0 is Running; anything else (Shutdown, Failed...) is
		// a server that will not deliver data.
		if st, ok := res.Results[0].Value.Value().(int32); ok && st != 0 {
			return adapters.WithCode(adapters.CodeDeviceOffline, fmt.Errorf("server state is %d, not Running", st))
		}
	}
	return nil
}

// listenError is nil when ctx ended, since that is a normal stop.
func (a *Adapter) listenError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	err = classify(fmt.Errorf("opcua endpoint %q: %s: %w", a.ep.Name, what, err))
	a.stats.noteError(err)
	return err
}
