package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/mqtt"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/logship"
	"github.com/edgeplat/edgeplat/roles/agent/publish"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/outbound"
	"github.com/edgeplat/edgeplat/roles/agent/publish/payload"
	"github.com/edgeplat/edgeplat/roles/agent/reconcile"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// destinationTestTimeout bounds POST /v1/publish/destinations/test.
const destinationTestTimeout = 5 * time.Second

// publishConfig is httpapi.Publishing: the stored publishing configuration,
// which the router follows at once.
type publishConfig struct {
	st    *storeRef
	pub   *publish.Router
	cloud *cloudService
	// logs gives the agent log buffer's figures; nil leaves them zero.
	logs interface{ Status() logship.Status }
	log  *slog.Logger
	// managed refuses local changes to what the target state manages.
	managed *managedGuard
}

// validateDestination checks a destination's type and its config_json for
// that type. Problems name the field.
func validateDestination(d store.Destination) error {
	var errs []error
	if strings.TrimSpace(d.Name) == "" {
		errs = append(errs, adapters.Fieldf("name", "is required"))
	} else if len(d.Name) > maxNameLen {
		errs = append(errs, adapters.Fieldf("name", "must be at most %d characters", maxNameLen))
	}
	if types := dest.Types(); !slices.Contains(types, d.Type) {
		return errors.Join(append(errs, adapters.Fieldf("type", "must be one of %s, got %q", strings.Join(types, ", "), d.Type))...)
	}
	if err := dest.Validate(d.Type, d.Config); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// singlePlatform refuses a second platform destination: the cloud's broker
// admits one connection per agent (its client id is the agent's), so two
// would take turns dropping each other.
func singlePlatform(ctx context.Context, st *store.Store, d store.Destination) error {
	if d.Type != dest.TypePlatform {
		return nil
	}
	ds, err := st.Publishing().Destinations(ctx, true)
	if err != nil {
		return err
	}
	for _, o := range ds {
		if o.Type == dest.TypePlatform && o.ID != d.ID {
			return httpapi.Errorf(http.StatusBadRequest, "type: destination %q (id %d) is the platform destination already; an agent has one connection to the cloud", o.Name, o.ID)
		}
	}
	return nil
}

// maskSecrets hides credential values of a config_json object.
func maskSecrets(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	for _, k := range dest.SecretKeys {
		if _, ok := m[k]; ok {
			m[k], _ = json.Marshal(redactedPassword)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// keepMaskedSecrets lets a client send back a masked config it read.
func keepMaskedSecrets(in, stored json.RawMessage) json.RawMessage {
	var m, old map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil || m == nil {
		return in
	}
	_ = json.Unmarshal(stored, &old)
	for _, k := range dest.SecretKeys {
		var v string
		if json.Unmarshal(m[k], &v) == nil && v == redactedPassword {
			if prev, ok := old[k]; ok {
				m[k] = prev
			} else {
				delete(m, k)
			}
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return in
	}
	return out
}

func destinationView(d store.Destination) store.Destination {
	d.Config = maskSecrets(d.Config)
	return d
}

func fillDestination(in httpapi.DestinationInput, d *store.Destination) {
	if in.Name != nil {
		d.Name = strings.TrimSpace(*in.Name)
	}
	if in.Type != nil {
		d.Type = *in.Type
	}
	if in.Config != nil {
		d.Config = keepMaskedSecrets(in.Config, d.Config)
	}
	if in.Enabled != nil {
		d.Enabled = *in.Enabled
	}
}

// reload makes publishing follow a change of the stored destinations or
// subscriptions at once. A failure is logged: the change is stored and
// the next reload or restart applies it.
func (p *publishConfig) reload(ctx context.Context) {
	if err := p.pub.Reload(ctx); err != nil {
		p.log.Error("publishing not reloaded", "err", err)
	}
}

// notFound makes the store's ErrNotFound for row id a 404.
func notFound(err error, what string, id int64) error {
	if errors.Is(err, store.ErrNotFound) {
		return httpapi.Errorf(http.StatusNotFound, "no %s %d", what, id)
	}
	return err
}

func (p *publishConfig) Destinations(ctx context.Context, includeDisabled bool) (any, error) {
	st, err := p.st.Open()
	if err != nil {
		return nil, err
	}
	ds, err := st.Publishing().Destinations(ctx, includeDisabled)
	for i := range ds {
		ds[i] = destinationView(ds[i])
	}
	return ds, err
}

// saveDestination validates d and stores it with save.
func (p *publishConfig) saveDestination(ctx context.Context, st *store.Store, d store.Destination, save func() (store.Destination, error)) (any, error) {
	if err := validateDestination(d); err != nil {
		return nil, httpapi.Invalid(err)
	}
	if err := singlePlatform(ctx, st, d); err != nil {
		return nil, err
	}
	d, err := save()
	if errors.Is(err, store.ErrDuplicate) {
		return nil, httpapi.Errorf(http.StatusBadRequest, "name: a destination named %q exists already", d.Name)
	}
	if err != nil {
		return nil, err
	}
	p.reload(ctx)
	return destinationView(d), nil
}

func (p *publishConfig) CreateDestination(ctx context.Context, in httpapi.DestinationInput) (any, error) {
	st, err := p.st.Open()
	if err != nil {
		return nil, err
	}
	d := store.Destination{Enabled: true}
	fillDestination(in, &d)
	if err := p.managed.item(ctx, reconcile.KindDestination, d.Name); err != nil {
		return nil, err
	}
	return p.saveDestination(ctx, st, d, func() (store.Destination, error) {
		created, err := st.Publishing().CreateDestination(ctx, d)
		if err != nil {
			return d, err
		}
		return created, nil
	})
}

func (p *publishConfig) UpdateDestination(ctx context.Context, id int64, in httpapi.DestinationInput) (any, error) {
	st, err := p.st.Open()
	if err != nil {
		return nil, err
	}
	d, err := st.Publishing().Destination(ctx, id)
	if err != nil {
		return nil, notFound(err, "destination", id)
	}
	if err := p.managed.item(ctx, reconcile.KindDestination, d.Name); err != nil {
		return nil, err
	}
	fillDestination(in, &d)
	if err := p.managed.item(ctx, reconcile.KindDestination, d.Name); err != nil {
		return nil, err
	}
	return p.saveDestination(ctx, st, d, func() (store.Destination, error) { return d, st.Publishing().UpdateDestination(ctx, d) })
}

func (p *publishConfig) DeleteDestination(ctx context.Context, id int64) error {
	st, err := p.st.Open()
	if err != nil {
		return err
	}
	if err := p.managedDestination(ctx, st, id); err != nil {
		return err
	}
	if err := st.Publishing().DeleteDestination(ctx, id); err != nil {
		return notFound(err, "destination", id)
	}
	p.pub.ForgetStopped(ctx, id)
	// Its subscriptions went with it: the router follows at once.
	p.reload(ctx)
	return nil
}

func (p *publishConfig) TestDestination(ctx context.Context, in httpapi.DestinationTest) (string, error) {
	if in.Type != dest.TypeTSDB && in.Type != dest.TypeMQTT {
		return "", fmt.Errorf("type %q cannot be tested; testable types are tsdb and mqtt", in.Type)
	}
	if err := validateDestination(store.Destination{Name: "test", Type: in.Type, Config: in.Config}); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, destinationTestTimeout)
	defer cancel()
	return dest.Probe(ctx, in.Type, in.Config, dest.Env{Logger: p.log})
}

func fillSubscription(in httpapi.SubscriptionInput, s *store.Subscription) {
	if in.DestinationID != nil {
		s.DestinationID = *in.DestinationID
	}
	if in.Topics != nil {
		s.Topics = in.Topics
	}
	if in.PayloadFormat != nil {
		s.PayloadFormat = *in.PayloadFormat
	}
	if in.Compression != nil {
		s.Compression = *in.Compression
	}
	if in.Enabled != nil {
		s.Enabled = *in.Enabled
	}
	if in.Route != nil {
		s.Route = in.Route
	}
}

// checkSubscription validates a subscription against its destination,
// naming every field at fault.
func checkSubscription(ctx context.Context, st *store.Store, s store.Subscription) error {
	var errs []error
	d, err := st.Publishing().Destination(ctx, s.DestinationID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		errs = append(errs, adapters.Fieldf("publish_destination_id", "no destination %d", s.DestinationID))
	case err != nil:
		return err
	}
	destType := ""
	if err == nil {
		destType = d.Type
	}
	if err := subscriptionFields(s, destType, errs); err != nil {
		return httpapi.Invalid(err)
	}
	return nil
}

// subscriptionFields adds the problems of s's own fields to errs, for a
// destination of type destType ("" when it has none), one per line.
func subscriptionFields(s store.Subscription, destType string, errs []error) error {
	for i, t := range s.Topics {
		if err := mqtt.ValidateFilter(t); err != nil {
			errs = append(errs, adapters.Fieldf(fmt.Sprintf("topics[%d]", i), "%v", err))
		}
	}
	if _, err := payload.ParseFormat(s.PayloadFormat); err != nil {
		errs = append(errs, err)
	}
	if _, err := payload.ParseCompression(s.Compression); err != nil {
		errs = append(errs, err)
	}
	var route struct {
		Topic string `json:"topic"`
	}
	if len(s.Route) > 0 && string(s.Route) != "null" {
		if err := json.Unmarshal(s.Route, &route); err != nil {
			errs = append(errs, adapters.Fieldf("route_json", "must be an object: %v", err))
		}
	}
	if destType != "" && destType != dest.TypePlatform {
		if route.Topic == "" {
			errs = append(errs, adapters.Fieldf("route_json.topic", "is required for a %s destination", destType))
		} else if strings.ContainsAny(route.Topic, "+#") {
			errs = append(errs, adapters.Fieldf("route_json.topic", "must not contain wildcards"))
		}
	}
	return errors.Join(errs...)
}

func (p *publishConfig) Subscriptions(ctx context.Context, destination int64, includeDisabled bool) (any, error) {
	st, err := p.st.Open()
	if err != nil {
		return nil, err
	}
	return st.Publishing().Subscriptions(ctx, destination, includeDisabled)
}

func (p *publishConfig) CreateSubscription(ctx context.Context, in httpapi.SubscriptionInput) (any, error) {
	st, err := p.st.Open()
	if err != nil {
		return nil, err
	}
	s := store.Subscription{Topics: []string{}, PayloadFormat: string(payload.Custom), Compression: "json", Enabled: true}
	fillSubscription(in, &s)
	if err := p.managedDestination(ctx, st, s.DestinationID); err != nil {
		return nil, err
	}
	if err := checkSubscription(ctx, st, s); err != nil {
		return nil, err
	}
	s, err = st.Publishing().CreateSubscription(ctx, s)
	if err != nil {
		return nil, err
	}
	p.reload(ctx)
	return s, nil
}

func (p *publishConfig) UpdateSubscription(ctx context.Context, id int64, in httpapi.SubscriptionInput) (any, error) {
	st, err := p.st.Open()
	if err != nil {
		return nil, err
	}
	s, err := st.Publishing().Subscription(ctx, id)
	if err != nil {
		return nil, notFound(err, "subscription", id)
	}
	if err := p.managedDestination(ctx, st, s.DestinationID); err != nil {
		return nil, err
	}
	fillSubscription(in, &s)
	if err := p.managedDestination(ctx, st, s.DestinationID); err != nil {
		return nil, err
	}
	if err := checkSubscription(ctx, st, s); err != nil {
		return nil, err
	}
	if err := st.Publishing().UpdateSubscription(ctx, s); err != nil {
		return nil, err
	}
	p.reload(ctx)
	return s, nil
}

func (p *publishConfig) DeleteSubscription(ctx context.Context, id int64) error {
	st, err := p.st.Open()
	if err != nil {
		return err
	}
	if s, err := st.Publishing().Subscription(ctx, id); err == nil {
		if err := p.managedDestination(ctx, st, s.DestinationID); err != nil {
			return err
		}
	}
	if err := st.Publishing().DeleteSubscription(ctx, id); err != nil {
		return notFound(err, "subscription", id)
	}
	p.reload(ctx)
	return nil
}

// managedDestination refuses a change to destination id, or to its
// subscriptions, when the target state manages it.
func (p *publishConfig) managedDestination(ctx context.Context, st *store.Store, id int64) error {
	d, err := st.Publishing().Destination(ctx, id)
	if err != nil {
		// An unknown destination answers 404 or 400 further on.
		return nil
	}
	return p.managed.item(ctx, reconcile.KindDestination, d.Name)
}

// protocolOutput is a protocol output as the API shows it.
type protocolOutput struct {
	Protocol      string          `json:"protocol"`
	PayloadFormat string          `json:"payload_format"`
	DriftOptions  json.RawMessage `json:"drift_options"`
}

func protocolOutputView(o store.ProtocolOutput) protocolOutput {
	return protocolOutput{Protocol: o.Protocol, PayloadFormat: o.PayloadFormat, DriftOptions: o.DriftOptions}
}

func (p *publishConfig) ProtocolOutputs(ctx context.Context) (any, error) {
	st, err := p.st.Open()
	if err != nil {
		return nil, err
	}
	outs, err := st.Publishing().ProtocolOutputs(ctx)
	views := make([]protocolOutput, len(outs))
	for i, o := range outs {
		views[i] = protocolOutputView(o)
	}
	return views, err
}

// bufferStatus is GET /v1/buffer/status (docs/agent.md, section
// Publishing). The transport figures are those of the platform destination
// (the cloud), summed when there are several; every destination's own
// figures are under destinations.
//
// The agent log buffer's figures (agentLog*) are the cloud log shipper's
// (docs/control-channel.md, section "Agent logs"). State reports are
// never queued, so there is no report queue to show.
type bufferStatus struct {
	Mode          string                      `json:"mode"`
	TransportMode outbound.Mode               `json:"transportPublishMode"`
	Records       int64                       `json:"mqttMessageBufferCount"`
	Bytes         int64                       `json:"mqttBufferBytes"`
	LastAttempt   *string                     `json:"lastFlushAttempt"`
	LastSuccess   *string                     `json:"lastFlushSuccess"`
	Destinations  []publish.DestinationStatus `json:"destinations"`
	logship.Status
}

func (p *publishConfig) BufferStatus(ctx context.Context) (any, error) {
	st, err := p.st.Open()
	if err != nil {
		return nil, err
	}
	dests, err := p.pub.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	out := bufferStatus{Mode: p.cloud.mode(ctx, st), TransportMode: outbound.ModeDirect, Destinations: dests}
	if p.logs != nil {
		out.Status = p.logs.Status()
	}
	var lastAttempt, lastSuccess time.Time
	for _, d := range dests {
		if d.Type != dest.TypePlatform {
			continue
		}
		out.Records += d.Worker.Records
		out.Bytes += d.Worker.Bytes
		out.TransportMode = worse(out.TransportMode, d.Worker.Mode)
		lastAttempt = later(lastAttempt, d.Worker.LastFlushAttempt)
		lastSuccess = later(lastSuccess, d.Worker.LastFlushSuccess)
	}
	out.LastAttempt, out.LastSuccess = optionalTime(lastAttempt), optionalTime(lastSuccess)
	return out, nil
}

// worse orders publish modes by how far from normal they are, so several
// platform destinations report the one in the worst state.
func worse(a, b outbound.Mode) outbound.Mode {
	rank := map[outbound.Mode]int{outbound.ModeDirect: 0, outbound.ModeRecovering: 1, outbound.ModeBufferOnly: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func optionalTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}
