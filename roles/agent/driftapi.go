package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/drift"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// driftStore is the drift service's store side and httpapi.Drift: the
// protocol outputs' drift options and the drift events, in the store of
// the current run.
type driftStore struct {
	st  *storeRef
	svc *drift.Service
	log *slog.Logger
}

// DriftOptions implements drift.OptionSource. Options that no longer
// parse (stored by another build) leave their output off, with a warning.
func (d driftStore) DriftOptions(ctx context.Context) (map[string]drift.Options, error) {
	st, err := d.st.Open()
	if err != nil {
		return nil, err
	}
	outs, err := st.Publishing().ProtocolOutputs(ctx)
	if err != nil {
		return nil, err
	}
	m := map[string]drift.Options{}
	for _, o := range outs {
		opts, err := drift.ParseOptions(o.DriftOptions)
		if err != nil {
			d.log.Warn("stored drift options ignored", "protocol", o.Protocol, "err", err)
			continue
		}
		if opts.Enabled {
			m[o.Protocol] = opts
		}
	}
	return m, nil
}

// SaveDriftEvents implements drift.EventStore.
func (d driftStore) SaveDriftEvents(ctx context.Context, events []drift.Event) error {
	st, err := d.st.Open()
	if err != nil {
		return err
	}
	rows := make([]store.DriftEvent, len(events))
	for i, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode drift event %s: %w", e.ID, err)
		}
		rows[i] = store.DriftEvent{ID: e.ID, Protocol: e.Protocol, Kind: string(e.Kind), Field: e.Field, At: e.At, Event: b}
	}
	return st.Drift().Add(ctx, rows, store.DriftKeep)
}

// SetDriftOptions implements httpapi.Drift: the options are stored as
// their complete form, defaults filled in, so GET /v1/protocol-outputs
// shows what is in force.
func (d driftStore) SetDriftOptions(ctx context.Context, protocol string, raw json.RawMessage) (any, error) {
	opts, err := drift.ParseOptions(raw)
	if err != nil {
		return nil, httpapi.Invalid(underOptions(err))
	}
	var doc json.RawMessage // nil clears
	if string(raw) != "null" {
		if doc, err = json.Marshal(opts); err != nil {
			return nil, fmt.Errorf("encode drift options: %w", err)
		}
	}
	st, err := d.st.Open()
	if err != nil {
		return nil, err
	}
	out, err := st.Publishing().SetDriftOptions(ctx, protocol, doc)
	if err != nil {
		return nil, err
	}
	if err := d.svc.SetOptions(protocol, opts); err != nil {
		return nil, fmt.Errorf("apply drift options: %w", err)
	}
	return protocolOutputView(out), nil
}

// driftKinds are the kinds GET /v1/drift/events?kind= takes.
var driftKinds = []string{string(drift.KindMissingField), string(drift.KindNewField), string(drift.KindTypeChanged),
	string(drift.KindFieldRetired), string(drift.KindFieldLimit)}

// DriftEvents implements httpapi.Drift.
func (d driftStore) DriftEvents(ctx context.Context, q httpapi.DriftQuery) (any, int, error) {
	if q.Kind != "" && !slices.Contains(driftKinds, q.Kind) {
		return nil, 0, httpapi.Errorf(http.StatusBadRequest, "kind: must be one of %v, got %q", driftKinds, q.Kind)
	}
	st, err := d.st.Open()
	if err != nil {
		return nil, 0, err
	}
	return st.Drift().List(ctx, store.DriftFilter{Protocol: q.Protocol, Kind: q.Kind, Field: q.Field, Since: q.Since, Limit: q.Limit})
}

// ClearDriftEvents implements httpapi.Drift.
func (d driftStore) ClearDriftEvents(ctx context.Context) (int64, error) {
	st, err := d.st.Open()
	if err != nil {
		return 0, err
	}
	return st.Drift().Clear(ctx)
}

// DriftState implements httpapi.Drift.
func (d driftStore) DriftState(context.Context) (any, error) { return d.svc.State(), nil }

var (
	_ drift.OptionSource = driftStore{}
	_ drift.EventStore   = driftStore{}
	_ httpapi.Drift      = driftStore{}
)

// underOptions names each field of an options error by its path in the
// request body ("drift_options.windowMs"), as the API names fields
// everywhere, so a form puts the message by its input.
func underOptions(err error) error {
	var errs []error
	var walk func(error)
	walk = func(e error) {
		var fe *adapters.FieldError
		switch j, ok := e.(interface{ Unwrap() []error }); {
		case ok:
			for _, x := range j.Unwrap() {
				walk(x)
			}
		case errors.As(e, &fe) && fe.Field != "drift_options":
			errs = append(errs, adapters.Fieldf("drift_options."+fe.Field, "%s", fe.Msg))
		case errors.As(e, &fe):
			errs = append(errs, e)
		default:
			errs = append(errs, fmt.Errorf("drift_options: %w", e))
		}
	}
	walk(err)
	return errors.Join(errs...)
}
