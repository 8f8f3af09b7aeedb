package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// Defaults of a subscription, as POST /v1/publish/subscriptions has them.
const (
	defaultPayloadFormat = "custom"
	defaultCompression   = "json"
)

// plan is a validated document and the changes that bring the local
// state to it.
type plan struct {
	r *Reconciler

	settings []byte // nil: nothing to change

	putEndpoints    []endpointChange
	removeEndpoints []adapters.Endpoint
	// stop is the run state to set, nil when it is set already.
	stop *bool

	putDests    []store.Destination // ID 0: create
	removeDests []store.Destination
	// subs are the wanted subscriptions of each managed destination, by
	// name; a destination whose stored subscriptions differ gets these.
	subs     map[string][]store.Subscription
	localSub []store.Subscription

	// apps is the document's apps section (nil: the local apps);
	// appsChanged says it differs from the previous document's.
	apps        []control.TargetApp
	appsChanged bool
	runStopped  bool
}

type endpointChange struct {
	ep     adapters.Endpoint
	create bool
}

// plan validates doc as a whole against the local state and lists the
// differences. Nothing changes here.
func (r *Reconciler) plan(ctx context.Context, doc control.TargetStateDoc) (*plan, error) {
	p := &plan{r: r, subs: map[string][]store.Subscription{}}
	var prev control.TargetStateDoc
	if r.cur != nil {
		prev = r.cur.Doc
	}
	var errs []error
	if doc.Settings != nil {
		patch, err := json.Marshal(doc.Settings)
		if err != nil {
			return nil, fmt.Errorf("encode settings: %w", err)
		}
		changed, err := r.settings.CheckSettings(patch)
		switch {
		case err != nil:
			errs = append(errs, prefixed("settings", err))
		case changed:
			p.settings = patch
		}
	}
	if want := stopped(doc); want != r.endpoints.Stopped() {
		p.stop = &want
	}
	if err := p.planEndpoints(ctx, doc, prev); err != nil {
		errs = append(errs, err)
	}
	if err := p.planPublishing(ctx, doc, prev); err != nil {
		errs = append(errs, err)
	}
	if doc.Apps != nil {
		if r.apps == nil {
			errs = append(errs, &control.PathError{Path: "apps", Msg: "this agent does not run apps"})
		} else if err := r.apps.CheckApps(doc.Apps); err != nil {
			errs = append(errs, err)
		}
	}
	p.apps, p.runStopped = doc.Apps, stopped(doc)
	p.appsChanged = (doc.Apps == nil) != (prev.Apps == nil) || canonical(doc.Apps) != canonical(prev.Apps)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *plan) planEndpoints(ctx context.Context, doc, prev control.TargetStateDoc) error {
	stored, err := p.r.endpoints.Stored(ctx)
	if err != nil {
		return err
	}
	byName := make(map[string]adapters.Endpoint, len(stored))
	for _, ep := range stored {
		byName[ep.Name] = ep
	}
	var errs []error
	for i, te := range doc.Endpoints {
		want, err := p.r.endpoints.Build(te)
		if err != nil {
			errs = append(errs, prefixed(fmt.Sprintf("endpoints[%d]", i), err))
			continue
		}
		have, ok := byName[te.Name]
		if !ok {
			p.putEndpoints = append(p.putEndpoints, endpointChange{ep: want, create: true})
			continue
		}
		// The stored endpoint keeps its UUID (its readings' identity);
		// it changes only when something else differs.
		want.UUID = have.UUID
		if canonical(want) != canonical(have) {
			p.putEndpoints = append(p.putEndpoints, endpointChange{ep: want})
		}
	}
	wanted := endpointNames(doc)
	for _, name := range endpointNames(prev) {
		if ep, ok := byName[name]; ok && !slices.Contains(wanted, name) {
			p.removeEndpoints = append(p.removeEndpoints, ep)
		}
	}
	return errors.Join(errs...)
}

// wantDestination is a document's destination as the store keeps it.
func wantDestination(td control.TargetDestination) store.Destination {
	d := store.Destination{Name: td.Name, Type: td.Type, Config: td.Config, Enabled: true}
	if d.Config == nil {
		d.Config = json.RawMessage("null")
	}
	if td.Enabled != nil {
		d.Enabled = *td.Enabled
	}
	return d
}

// wantSubscription is a document's subscription as the store keeps it,
// without its destination id.
func wantSubscription(ts control.TargetSubscription) store.Subscription {
	s := store.Subscription{Topics: ts.Topics, PayloadFormat: defaultPayloadFormat, Compression: defaultCompression, Enabled: true, Route: ts.Route}
	if s.Topics == nil {
		s.Topics = []string{}
	}
	if s.Route == nil {
		s.Route = json.RawMessage("null")
	}
	if ts.PayloadFormat != nil {
		s.PayloadFormat = *ts.PayloadFormat
	}
	if ts.Compression != nil {
		s.Compression = *ts.Compression
	}
	if ts.Enabled != nil {
		s.Enabled = *ts.Enabled
	}
	return s
}

func (p *plan) planPublishing(ctx context.Context, doc, prev control.TargetStateDoc) error {
	stored, err := p.r.publish.Destinations(ctx)
	if err != nil {
		return err
	}
	subs, err := p.r.publish.Subscriptions(ctx)
	if err != nil {
		return err
	}
	p.localSub = subs
	byName := make(map[string]store.Destination, len(stored))
	for _, d := range stored {
		byName[d.Name] = d
	}
	var errs []error
	wantedNames := destinationNames(doc)
	platforms := 0
	for i, td := range doc.Destinations {
		want := wantDestination(td)
		if err := p.r.publish.CheckDestination(want); err != nil {
			errs = append(errs, prefixed(fmt.Sprintf("destinations[%d]", i), err))
			continue
		}
		if want.Type == "platform" {
			platforms++
			// The cloud's broker admits one connection per agent: a
			// platform destination the document does not name would
			// fight this one.
			for _, d := range stored {
				if d.Type == "platform" && !slices.Contains(wantedNames, d.Name) {
					errs = append(errs, &control.PathError{Path: fmt.Sprintf("destinations[%d].type", i),
						Msg: fmt.Sprintf("the agent has platform destination %q already; name it in the document to manage it", d.Name)})
				}
			}
		}
		have, ok := byName[td.Name]
		if ok {
			want.ID = have.ID
		}
		if !ok || canonical(want) != canonical(have) {
			p.putDests = append(p.putDests, want)
		}
	}
	if platforms > 1 {
		errs = append(errs, &control.PathError{Path: "destinations", Msg: "at most one platform destination; an agent has one connection to the cloud"})
	}
	for _, name := range destinationNames(prev) {
		if d, ok := byName[name]; ok && !slices.Contains(wantedNames, name) {
			p.removeDests = append(p.removeDests, d)
		}
	}
	typeOf := map[string]string{}
	for _, td := range doc.Destinations {
		typeOf[td.Name] = td.Type
		p.subs[td.Name] = []store.Subscription{}
	}
	for i, ts := range doc.Subscriptions {
		s := wantSubscription(ts)
		if err := p.r.publish.CheckSubscription(s, typeOf[ts.Destination]); err != nil {
			errs = append(errs, prefixed(fmt.Sprintf("subscriptions[%d]", i), err))
			continue
		}
		p.subs[ts.Destination] = append(p.subs[ts.Destination], s)
	}
	return errors.Join(errs...)
}

// sameSubscriptions compares a destination's subscriptions as sets,
// ignoring ids.
func sameSubscriptions(a, b []store.Subscription) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(ss []store.Subscription) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			s.ID, s.DestinationID = 0, 0
			out[i] = canonical(s)
		}
		sort.Strings(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// apply makes the planned changes: settings, destinations and their
// subscriptions, then the run state and endpoints, then removals. It returns how many
// changes it made.
func (p *plan) apply(ctx context.Context) (int, error) {
	n := 0
	r := p.r
	if p.settings != nil {
		if err := r.settings.ApplySettings(ctx, p.settings); err != nil {
			return n, fmt.Errorf("apply settings: %w", err)
		}
		n++
	}
	reload := false
	ids := map[string]int64{}
	for _, d := range p.putDests {
		saved, err := r.publish.PutDestination(ctx, d)
		if err != nil {
			return n, fmt.Errorf("put destination %q: %w", d.Name, err)
		}
		ids[d.Name] = saved.ID
		n++
		reload = true
	}
	dests, err := r.publish.Destinations(ctx)
	if err != nil {
		return n, err
	}
	for _, d := range dests {
		ids[d.Name] = d.ID
	}
	for _, name := range sortedNames(p.subs) {
		want := p.subs[name]
		id := ids[name]
		var have []store.Subscription
		for _, s := range p.localSub {
			if s.DestinationID == id {
				have = append(have, s)
			}
		}
		if sameSubscriptions(want, have) {
			continue
		}
		for _, s := range have {
			if err := r.publish.DeleteSubscription(ctx, s.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return n, fmt.Errorf("delete subscription %d: %w", s.ID, err)
			}
		}
		for _, s := range want {
			s.DestinationID = id
			if err := r.publish.CreateSubscription(ctx, s); err != nil {
				return n, fmt.Errorf("create subscription of %q: %w", name, err)
			}
		}
		n++
		reload = true
	}
	// Stopping comes before the endpoint changes, so none of them starts
	// only to stop; running again comes after, so the final set starts.
	if p.stop != nil && *p.stop {
		if err := r.endpoints.SetStopped(ctx, true); err != nil {
			return n, fmt.Errorf("stop endpoints: %w", err)
		}
		r.log.Info("run state stopped: endpoints stop, their definitions stay")
		n++
	}
	for _, c := range p.putEndpoints {
		if err := r.endpoints.Put(ctx, c.ep, c.create); err != nil {
			return n, fmt.Errorf("put endpoint %q: %w", c.ep.Name, err)
		}
		n++
	}
	for _, ep := range p.removeEndpoints {
		if err := r.endpoints.Remove(ctx, ep); err != nil {
			return n, fmt.Errorf("remove endpoint %q: %w", ep.Name, err)
		}
		n++
	}
	if p.stop != nil && !*p.stop {
		if err := r.endpoints.SetStopped(ctx, false); err != nil {
			return n, fmt.Errorf("run endpoints again: %w", err)
		}
		r.log.Info("run state running: endpoints run again")
		n++
	}
	for _, d := range p.removeDests {
		if err := r.publish.DeleteDestination(ctx, d.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return n, fmt.Errorf("remove destination %q: %w", d.Name, err)
		}
		n++
		reload = true
	}
	if reload {
		r.publish.Reload(ctx)
	}
	// Apps follow every applied document, changed or not, so the run
	// state and a target kept since the last start reach the apps'
	// reconciler; it changes nothing when nothing differs.
	if r.apps != nil {
		if err := r.apps.ApplyApps(ctx, p.apps, p.runStopped); err != nil {
			return n, fmt.Errorf("apply apps: %w", err)
		}
		if p.appsChanged {
			n++
		}
	}
	return n, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
