// Package reconcile applies the cloud's target-state document
// (docs/target-state.md) to the agent's local state: its settings,
// protocol endpoints, publishing destinations and subscriptions.
//
// A document is validated as a whole with the agent's own validators
// before anything changes; an invalid one is refused and the last good
// one keeps running. Applying compares the document with the local state
// and changes only what differs, so applying the same document twice
// changes nothing (no endpoint restarts). The items a document names are
// managed: the agent's local API refuses to change them (Managed), and
// an item the previous document named that the new one drops is removed.
// Local items no document named are left alone.
//
// A document's runState stopped stops every endpoint, managed or local,
// without touching a definition; running (or none) runs them again
// (docs/target-state.md, section Run state). The run state is kept with
// the applied document, so it holds across restarts.
package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// Endpoints are the agent's protocol endpoints as the reconciler needs
// them: stored definitions and the running set.
type Endpoints interface {
	// Stored lists the stored endpoints.
	Stored(ctx context.Context) ([]adapters.Endpoint, error)
	// Build turns a document's endpoint into the endpoint the agent's
	// POST /v1/endpoints would store (defaults filled in) and validates
	// it with the agent's validators. Errors name fields relative to the
	// endpoint ("poll_interval: ...").
	Build(te control.TargetEndpoint) (adapters.Endpoint, error)
	// Put stores ep (create when create is set, else replace by UUID)
	// and makes the runner follow it.
	Put(ctx context.Context, ep adapters.Endpoint, create bool) error
	// Remove stops ep and deletes it.
	Remove(ctx context.Context, ep adapters.Endpoint) error
	// Stopped reports whether the endpoints are stopped by the run state.
	Stopped() bool
	// SetStopped stops every endpoint (stopped) or runs the enabled ones
	// again; no stored definition or enabled flag changes.
	SetStopped(ctx context.Context, stopped bool) error
}

// Settings are the agent's settings groups.
type Settings interface {
	// CheckSettings validates patch (a PATCH /v1/settings body) against
	// the settings in force and says whether applying it changes any.
	CheckSettings(patch []byte) (changed bool, err error)
	// ApplySettings merges patch into the settings, stores and applies
	// them.
	ApplySettings(ctx context.Context, patch []byte) error
}

// Publishing is the publishing configuration.
type Publishing interface {
	Destinations(ctx context.Context) ([]store.Destination, error)
	Subscriptions(ctx context.Context) ([]store.Subscription, error)
	// CheckDestination validates a destination; CheckSubscription a
	// subscription going to a destination of type destType. Errors name
	// fields relative to the item.
	CheckDestination(d store.Destination) error
	CheckSubscription(s store.Subscription, destType string) error
	// PutDestination creates (ID 0) or replaces a destination.
	PutDestination(ctx context.Context, d store.Destination) (store.Destination, error)
	DeleteDestination(ctx context.Context, id int64) error
	CreateSubscription(ctx context.Context, s store.Subscription) error
	DeleteSubscription(ctx context.Context, id int64) error
	// Reload makes the running destinations follow the stored ones.
	Reload(ctx context.Context)
}

// Apps are the agent's applications (docs/apps.md).
type Apps interface {
	// CheckApps validates a document's apps section with the agent's own
	// policy (the allowed volume roots); errors carry their full path
	// ("apps[0].services[1].config.volumes[0]: ...").
	CheckApps(apps []control.TargetApp) error
	// ApplyApps makes apps the apps target; nil hands the target back to
	// the agent's local apps. stopped is the document's run state.
	ApplyApps(ctx context.Context, apps []control.TargetApp, stopped bool) error
}

// Meta keeps the applied document across restarts.
type Meta interface {
	Meta(ctx context.Context, key string) (string, error)
	SetMeta(ctx context.Context, key, value string) error
}

// Kind is a managed section with named items.
type Kind string

// The sections whose items have names.
const (
	KindEndpoint    Kind = "endpoint"
	KindDestination Kind = "destination"
)

// metaApplied is the store meta key of the applied document.
const metaApplied = "cloud.target_applied"

// applied is the document in force, as it is kept in the store.
type applied struct {
	Version   int64                  `json:"version"`
	AppliedAt time.Time              `json:"appliedAt"`
	Doc       control.TargetStateDoc `json:"doc"`
}

// Reconciler applies target-state documents. Its methods are safe for
// concurrent use.
type Reconciler struct {
	endpoints Endpoints
	settings  Settings
	publish   Publishing
	apps      Apps
	log       *slog.Logger
	now       func() time.Time

	// mu serialises Apply; view guards cur and status for readers.
	mu     sync.Mutex
	view   sync.RWMutex
	cur    *applied
	status control.TargetStatus
	// refused is the document of status.Refused, so it is not tried
	// again unless it changes.
	refused []byte
}

// New builds a reconciler over the agent's local state.
func New(e Endpoints, s Settings, p Publishing, log *slog.Logger) *Reconciler {
	return &Reconciler{endpoints: e, settings: s, publish: p, log: log, now: time.Now}
}

// SetApps hands the reconciler the agent's apps; without it a
// document's apps section is refused. Call it before the first Apply.
func (r *Reconciler) SetApps(a Apps) { r.apps = a }

// ManagedApps reports whether the applied document has an apps section
// (the cloud manages the apps then, and local writes are refused), and
// its version.
func (r *Reconciler) ManagedApps() (int64, bool) {
	r.view.RLock()
	defer r.view.RUnlock()
	if r.cur == nil || r.cur.Doc.Apps == nil {
		return 0, false
	}
	return r.cur.Version, true
}

// AppliedApps returns the applied document's apps and whether it has an
// apps section.
func (r *Reconciler) AppliedApps() ([]control.TargetApp, bool) {
	r.view.RLock()
	defer r.view.RUnlock()
	if r.cur == nil || r.cur.Doc.Apps == nil {
		return nil, false
	}
	return slices.Clone(r.cur.Doc.Apps), true
}

// TargetStatus is what the agent did with its target state, for its
// state report.
func (r *Reconciler) TargetStatus() control.TargetStatus {
	r.view.RLock()
	defer r.view.RUnlock()
	st := r.status
	if st.AppliedAt != nil {
		t := *st.AppliedAt
		st.AppliedAt = &t
	}
	return st
}

// Managed reports whether the applied document names the item, and its
// version.
func (r *Reconciler) Managed(kind Kind, name string) (int64, bool) {
	r.view.RLock()
	defer r.view.RUnlock()
	if r.cur == nil {
		return 0, false
	}
	var names []string
	switch kind {
	case KindEndpoint:
		names = endpointNames(r.cur.Doc)
	case KindDestination:
		names = destinationNames(r.cur.Doc)
	}
	return r.cur.Version, slices.Contains(names, name)
}

// ManagedSetting reports whether the applied document sets the setting
// group.key, and its version.
func (r *Reconciler) ManagedSetting(group, key string) (int64, bool) {
	r.view.RLock()
	defer r.view.RUnlock()
	if r.cur == nil {
		return 0, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(r.cur.Doc.Settings[group], &m) != nil {
		return 0, false
	}
	_, ok := m[key]
	return r.cur.Version, ok
}

// Load reads the applied document the store kept, so the managed items
// are known before the first pull.
func (r *Reconciler) Load(ctx context.Context, m Meta) error {
	raw, err := m.Meta(ctx, metaApplied)
	if errors.Is(err, store.ErrNotFound) {
		// No applied document yet: nothing is managed.
		r.set(nil, control.TargetStatus{})
		return nil
	}
	if err != nil {
		return fmt.Errorf("read applied target state: %w", err)
	}
	var a applied
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return fmt.Errorf("read applied target state: %w", err)
	}
	at := a.AppliedAt
	r.set(&a, control.TargetStatus{Version: a.Version, AppliedAt: &at})
	return nil
}

func (r *Reconciler) set(a *applied, st control.TargetStatus) {
	r.view.Lock()
	defer r.view.Unlock()
	r.cur, r.status = a, st
}

// Apply brings the local state to the document of version, unless that
// version is the one applied already (or refused already) and force is
// not set. force re-checks the local state against the applied document
// (at start). A refused document leaves everything as it was; its error
// is returned and kept in TargetStatus.
func (r *Reconciler) Apply(ctx context.Context, m Meta, version int64, state json.RawMessage, force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.TargetStatus()
	// The same version may come with other content: a secret value it
	// refers to changed on the cloud.
	if !force && st.Refused == version && st.Error != "" && bytes.Equal(state, r.refused) {
		return nil
	}
	doc, err := control.ParseResolvedTargetState(state)
	if err == nil && !force && r.cur != nil && st.Version == version && canonical(doc) == canonical(r.cur.Doc) &&
		r.endpoints.Stopped() == stopped(doc) {
		return nil
	}
	var plan *plan
	if err == nil {
		plan, err = r.plan(ctx, doc)
	}
	if err != nil {
		err = fmt.Errorf("target state version %d refused: %w", version, err)
		st.Refused, st.Error = version, err.Error()
		r.refused = bytes.Clone(state)
		r.set(r.cur, st)
		r.log.Error("target state refused; keeping the applied one", "version", version, "applied", st.Version, "err", err)
		return err
	}
	changes, err := plan.apply(ctx)
	if err != nil {
		// A store failure half way: what was applied stays, and the next
		// pull or start tries again.
		err = fmt.Errorf("apply target state version %d: %w", version, err)
		st.Refused, st.Error = 0, err.Error()
		r.set(r.cur, st)
		return err
	}
	a := &applied{Version: version, AppliedAt: r.now().UTC(), Doc: doc}
	if r.cur != nil && r.cur.Version == version {
		a.AppliedAt = r.cur.AppliedAt
	}
	body, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode applied target state: %w", err)
	}
	if err := m.SetMeta(ctx, metaApplied, string(body)); err != nil {
		return fmt.Errorf("keep applied target state: %w", err)
	}
	at := a.AppliedAt
	r.set(a, control.TargetStatus{Version: version, AppliedAt: &at})
	if changes > 0 || r.cur == nil || st.Version != version {
		r.log.Info("target state applied", "version", version, "changes", changes)
	}
	return nil
}

// RunState is the applied document's run state: control.RunStopped, or
// control.RunRunning when it sets none or none was applied.
func (r *Reconciler) RunState() string {
	r.view.RLock()
	defer r.view.RUnlock()
	if r.cur != nil && stopped(r.cur.Doc) {
		return control.RunStopped
	}
	return control.RunRunning
}

// stopped reports whether d stops the agent's work.
func stopped(d control.TargetStateDoc) bool { return d.RunState == control.RunStopped }

func endpointNames(d control.TargetStateDoc) []string {
	out := make([]string, len(d.Endpoints))
	for i, e := range d.Endpoints {
		out[i] = e.Name
	}
	return out
}

func destinationNames(d control.TargetStateDoc) []string {
	out := make([]string, len(d.Destinations))
	for i, e := range d.Destinations {
		out[i] = e.Name
	}
	return out
}

// prefixed names err's fields under path: every line "field: msg" of a
// joined validation error becomes "path.field: msg".
func prefixed(path string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = path + "." + l
	}
	return errors.New(strings.Join(lines, "\n"))
}

// canonical is v as JSON with object keys sorted, for comparing what is
// stored with what is wanted.
func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var x any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&x) != nil {
		return string(b)
	}
	out, _ := json.Marshal(x)
	return string(out)
}
