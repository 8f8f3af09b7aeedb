package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// errNotProvisioned answers a pull on an agent without a cloud.
var errNotProvisioned = errors.New("the agent is not provisioned; POST /v1/provision first")

// pullResult is the answer of one target-state pull.
type pullResult struct {
	Changed   bool   `json:"changed"`
	Version   int64  `json:"version"`
	ETag      string `json:"etag"`
	UpdatedAt string `json:"updatedAt,omitempty"`
}

// cloudState tracks whether the cloud answered the last pull, which is what
// the agent's mode (provisioned-online or provisioned-degraded-offline)
// follows.
type cloudState struct {
	online   atomic.Bool
	lastPull atomic.Int64 // Unix ms of the last pull attempt
}

// pull fetches the target state with If-None-Match and keeps a changed
// one with its ETag, so a restart without the cloud still has it. The
// store is held open for the pull (holdStore's rule for requests).
func (a *Agent) pull(ctx context.Context) (pullResult, error) {
	a.storeMu.RLock()
	defer a.storeMu.RUnlock()
	st := a.st.Load()
	if st == nil {
		return pullResult{}, errNotReady
	}
	cr, err := a.credentials(ctx, st)
	if err != nil {
		return pullResult{}, err
	}
	if cr == nil || !a.provisioned(ctx, st) {
		return pullResult{}, errNotProvisioned
	}
	client, err := cloud.NewClient(cr.APIEndpoint)
	if err != nil {
		return pullResult{}, err
	}
	etag, _ := st.Meta(ctx, metaTargetETag)
	a.cloud.lastPull.Store(time.Now().UnixMilli())
	a.cloudM.attempts.Inc()
	ts, newETag, changed, err := client.TargetState(ctx, *cr, etag)
	if err != nil {
		a.cloudM.failures.Inc()
		if a.cloud.online.Swap(false) {
			a.log.Warn("cloud unreachable; running on the cached target state", "err", err)
		}
		return pullResult{}, err
	}
	a.cloudM.lastSuccess.SetToCurrentTime()
	if !a.cloud.online.Swap(true) {
		a.log.Info("cloud reachable")
	}
	res := pullResult{Changed: changed, ETag: newETag}
	if !changed {
		var cached cloud.TargetState
		if raw, err := st.Meta(ctx, metaTargetState); err == nil {
			_ = json.Unmarshal([]byte(raw), &cached)
		}
		res.Version, res.UpdatedAt = cached.Version, cached.UpdatedAt
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
	a.log.Info("target state updated", "version", ts.Version)
	return res, nil
}

// syncLoop pulls the target state every intervals.statePollMs (read at
// each round, so a settings change applies at the next one) while the
// agent is provisioned.
func (a *Agent) syncLoop(ctx context.Context) {
	for {
		wait := time.Duration(a.settings.Load().Intervals.StatePollMS) * time.Millisecond
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if _, err := a.pull(ctx); err != nil && !errors.Is(err, errNotProvisioned) && !errors.Is(err, errNotReady) {
			a.log.Debug("target state pull failed", "err", err)
		}
	}
}

// syncPull is POST /v1/sync/pull: one pull now. Not being provisioned is
// an error object in a 200 answer, as the spec has it.
func (a *Agent) syncPull(c *gin.Context) {
	res, err := a.pull(c.Request.Context())
	switch {
	case errors.Is(err, errNotProvisioned):
		c.JSON(http.StatusOK, gin.H{"error": err.Error(), "provisioned": false})
	case errors.Is(err, errNotReady):
		fail(c, http.StatusServiceUnavailable, "%v", err)
	case err != nil:
		var ce *cloud.Error
		if errors.As(err, &ce) {
			fail(c, http.StatusBadGateway, "the cloud refused the pull: %v", err)
			return
		}
		fail(c, http.StatusBadGateway, "the cloud could not be reached: %v", err)
	default:
		c.JSON(http.StatusOK, res)
	}
}

// mode is the agent mode of edge-agent.md §3.
func (a *Agent) mode(ctx context.Context, st *store.Store) string {
	if st == nil || !a.provisioned(ctx, st) {
		return "standalone"
	}
	if a.cloud.online.Load() {
		return "provisioned-online"
	}
	return "provisioned-degraded-offline"
}
