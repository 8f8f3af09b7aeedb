package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// pullResult is the answer of one target-state pull.
type pullResult struct {
	Changed   bool   `json:"changed"`
	Version   int64  `json:"version"`
	ETag      string `json:"etag"`
	UpdatedAt string `json:"updatedAt,omitempty"`
	// TargetState is what the agent did with it: applied or refused.
	TargetState control.TargetStatus `json:"targetState"`
}

// pull fetches the target state with If-None-Match and keeps a changed
// one with its ETag, so a restart without the cloud still has it. The
// caller holds the store open.
func (s *cloudService) pull(ctx context.Context) (pullResult, error) {
	st, err := s.st.Open()
	if err != nil {
		return pullResult{}, err
	}
	cr, err := credentials(ctx, st)
	if err != nil {
		return pullResult{}, err
	}
	if cr == nil || !provisioned(ctx, st) {
		return pullResult{}, httpapi.ErrNotProvisioned
	}
	client, err := cloud.NewClient(cr.APIEndpoint)
	if err != nil {
		return pullResult{}, err
	}
	etag, _ := st.Meta(ctx, metaTargetETag)
	s.m.attempts.Inc()
	ts, newETag, changed, err := client.TargetState(ctx, *cr, etag)
	if err != nil {
		s.m.failures.Inc()
		if s.online.Swap(false) {
			s.log.Warn("cloud unreachable; running on the cached target state", "err", err)
		}
		return pullResult{}, err
	}
	s.m.lastSuccess.SetToCurrentTime()
	if !s.online.Swap(true) {
		s.log.Info("cloud reachable")
	}
	res := pullResult{Changed: changed, ETag: newETag}
	if !changed {
		var cached cloud.TargetState
		if raw, err := st.Meta(ctx, metaTargetState); err == nil {
			_ = json.Unmarshal([]byte(raw), &cached)
		}
		res.Version, res.UpdatedAt = cached.Version, cached.UpdatedAt
		// A no-op once applied; it applies what provisioning cached.
		s.applyTarget(ctx, st, false)
		return res, nil
	}
	doc, err := json.Marshal(ts)
	if err != nil {
		return res, err
	}
	if err := st.SetMeta(ctx, metaTargetState, string(doc)); err != nil {
		return res, err
	}
	if err := st.SetMeta(ctx, metaTargetETag, newETag); err != nil {
		return res, err
	}
	res.Version, res.UpdatedAt = ts.Version, ts.UpdatedAt
	s.log.Info("target state updated", "version", ts.Version)
	s.applyTarget(ctx, st, false)
	return res, nil
}

// syncLoop pulls the target state every intervals.statePollMs (read at
// each round, so a settings change applies at the next one) while the
// agent is provisioned, and at once when the cloud sends a target-state
// notice.
func (s *cloudService) syncLoop(ctx context.Context) {
	for {
		wait := time.Duration(s.settings.current().Intervals.StatePollMS) * time.Millisecond
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-s.kick:
			t.Stop()
		}
		// The loop holds the store open as a request would; a request
		// holds it already, and holding it twice could deadlock behind a
		// closing store.
		release := s.st.Hold()
		_, err := s.pull(ctx)
		release()
		if err != nil && !errors.Is(err, httpapi.ErrNotProvisioned) && !errors.Is(err, httpapi.ErrNotReady) {
			s.log.Debug("target state pull failed", "err", err)
		}
	}
}

// targetStateNotice handles control.CmdTargetState: the cloud's target
// state changed, so the sync loop pulls it now instead of at its next
// poll. Notices coalesce: one arriving during a pull makes one more pull
// after it, however many arrive, never a queue of pulls.
func (s *cloudService) targetStateNotice(_ context.Context, payload []byte) {
	n, err := control.DecodeTargetStateNotice(payload)
	if err != nil {
		s.log.Debug("target-state notice ignored", "err", err)
		return
	}
	s.log.Debug("target-state notice", "version", n.Version, "cleared", n.Cleared)
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Pull implements httpapi.Cloud: one pull now.
func (s *cloudService) Pull(ctx context.Context) (any, error) {
	res, err := s.pull(ctx)
	var ce *cloud.Error
	switch {
	case err == nil:
		res.TargetState = s.target.TargetStatus()
		return res, nil
	case errors.Is(err, httpapi.ErrNotProvisioned), errors.Is(err, httpapi.ErrNotReady):
		return nil, err
	case errors.As(err, &ce):
		return nil, httpapi.Errorf(http.StatusBadGateway, "the cloud refused the pull: %v", err)
	default:
		return nil, httpapi.Errorf(http.StatusBadGateway, "the cloud could not be reached: %v", err)
	}
}

// mode is the agent mode (docs/agent.md, section Provisioning):
// standalone, provisioned-online or provisioned-degraded-offline.
func (s *cloudService) mode(ctx context.Context, st *store.Store) string {
	if st == nil || !provisioned(ctx, st) {
		return "standalone"
	}
	if s.online.Load() {
		return "provisioned-online"
	}
	return "provisioned-degraded-offline"
}
