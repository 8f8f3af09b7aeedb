package bacnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet/wire"
)

// session reads properties of one device through a client: with
// ReadPropertyMultiple while the device takes it, else with ReadProperty
// per property.
type session struct {
	c       *client
	peer    netip.AddrPort
	timeout time.Duration
	// maxAPDU is the smaller of the configured and the device's limit.
	maxAPDU int
	// useRPM is the configuration's usePropertyMultiple; rpmRefused is set
	// for good once the device answered that it does not know RPM.
	useRPM, rpmRefused bool
	// noReliability holds the objects that have no reliability property,
	// so ReadProperty mode does not ask again every poll.
	noReliability map[wire.ObjectID]bool
	// rpm and rp count the requests sent, for diagnostics.
	rpm, rp int
	// limit, when set, paces the requests (WhoIs's rate limit).
	limit *limiter
}

type propKey struct {
	obj  wire.ObjectID
	prop wire.PropertyID
}

// propResult is a property's values or why it could not be read.
type propResult struct {
	vals []any
	err  error
}

// deviceAnswer reports whether err is the device answering (an Error,
// Reject or Abort, a segmented or undecodable answer) rather than the
// device not answering at all.
func deviceAnswer(err error) bool {
	var e *wire.Error
	var r *wire.RejectError
	var a *wire.AbortError
	var q *adapters.QualityError
	return errors.As(err, &e) || errors.As(err, &r) || errors.As(err, &a) || errors.Is(err, wire.ErrSegmented) || errors.As(err, &q)
}

// read reads every property of objs. A property the device refuses has
// its error in the result; a non-nil error means the device did not
// answer (time-out, closed socket) and the connection is to be dropped.
func (s *session) read(ctx context.Context, objs []objectRead) (map[propKey]propResult, error) {
	out := make(map[propKey]propResult)
	if s.useRPM && !s.rpmRefused {
		for _, group := range planRequests(objs, s.maxAPDU) {
			err := s.readMultiple(ctx, group, out)
			switch {
			case err == nil:
				continue
			case !deviceAnswer(err):
				return out, err
			case wire.UnrecognizedService(err):
				s.rpmRefused = true
			}
			// The device refused this request as a whole (an unknown object
			// in some devices, an answer too long): read its properties one
			// by one, so one bad object spoils only its own points.
			if err := s.readSingles(ctx, group, out); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	return out, s.readSingles(ctx, objs, out)
}

func (s *session) readMultiple(ctx context.Context, group []objectRead, out map[propKey]propResult) error {
	specs := make([]wire.ReadAccessSpec, len(group))
	for i, o := range group {
		refs := make([]wire.PropertyRef, len(o.props))
		for j, p := range o.props {
			refs[j] = wire.PropertyRef{ID: p, Index: wire.ArrayAll}
		}
		specs[i] = wire.ReadAccessSpec{Object: o.obj, Props: refs}
	}
	if err := s.limit.wait(ctx); err != nil {
		return err
	}
	s.rpm++
	a, err := s.c.request(ctx, s.peer, wire.ServiceReadPropertyMultiple, wire.AppendReadPropertyMultiple(nil, specs), s.timeout)
	if err != nil {
		return fmt.Errorf("read-property-multiple of %d objects: %w", len(group), err)
	}
	pvs, err := wire.DecodeReadPropertyMultipleAck(a.Payload)
	if err != nil {
		return adapters.WithCode(adapters.CodeBadData, err)
	}
	for _, pv := range pvs {
		if pv.Ref.Index != wire.ArrayAll {
			continue
		}
		r := propResult{vals: pv.Values}
		if pv.Err != nil {
			r = propResult{err: pv.Err}
		}
		out[propKey{pv.Object, pv.Ref.ID}] = r
	}
	// A property the answer left out is an error of its own, not a value.
	for _, o := range group {
		for _, p := range o.props {
			if _, ok := out[propKey{o.obj, p}]; !ok {
				out[propKey{o.obj, p}] = propResult{err: adapters.WithCode(adapters.CodeBadData, fmt.Errorf("%s %s missing from the answer", o.obj, p))}
			}
		}
	}
	return nil
}

func (s *session) readSingles(ctx context.Context, objs []objectRead, out map[propKey]propResult) error {
	for _, o := range objs {
		for _, p := range o.props {
			if p == wire.PropReliability && s.noReliability[o.obj] {
				continue
			}
			vals, err := s.readProperty(ctx, o.obj, wire.PropertyRef{ID: p, Index: wire.ArrayAll})
			if err != nil && !deviceAnswer(err) {
				return err
			}
			var e *wire.Error
			if p == wire.PropReliability && errors.As(err, &e) && e.Code == wire.ErrorCodeUnknownProperty {
				if s.noReliability == nil {
					s.noReliability = make(map[wire.ObjectID]bool)
				}
				s.noReliability[o.obj] = true
			}
			out[propKey{o.obj, p}] = propResult{vals: vals, err: err}
		}
	}
	return nil
}

// readProperty reads one property with ReadProperty.
func (s *session) readProperty(ctx context.Context, obj wire.ObjectID, ref wire.PropertyRef) ([]any, error) {
	if err := s.limit.wait(ctx); err != nil {
		return nil, err
	}
	s.rp++
	a, err := s.c.request(ctx, s.peer, wire.ServiceReadProperty, wire.AppendReadProperty(nil, obj, ref), s.timeout)
	if err != nil {
		return nil, fmt.Errorf("read-property %s %s: %w", obj, ref.ID, err)
	}
	pv, err := wire.DecodeReadPropertyAck(a.Payload)
	if err != nil {
		return nil, adapters.WithCode(adapters.CodeBadData, err)
	}
	if pv.Object != obj || pv.Ref != ref {
		return nil, adapters.WithCode(adapters.CodeBadData, fmt.Errorf("answer for %s %s to a read of %s %s", pv.Object, pv.Ref.ID, obj, ref.ID))
	}
	return pv.Values, nil
}

// one returns the single value of a property result.
func (r propResult) one() (any, error) {
	if r.err != nil {
		return nil, r.err
	}
	if len(r.vals) != 1 {
		return nil, adapters.WithCode(adapters.CodeBadData, fmt.Errorf("%d values where one was expected", len(r.vals)))
	}
	return r.vals[0], nil
}
