package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/report"
)

// storedTarget is report.TargetProvider until the agent applies its
// target state: it reports the version of the target state it last
// fetched and stored (metaTargetState), which is what it holds, not yet
// what it runs.
type storedTarget struct{ st *storeRef }

// TargetStatus implements report.TargetProvider.
func (t storedTarget) TargetStatus() control.TargetStatus {
	st := t.st.Load()
	if st == nil {
		return control.TargetStatus{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	raw, err := st.Meta(ctx, metaTargetState)
	if err != nil {
		return control.TargetStatus{}
	}
	var ts cloud.TargetState
	if json.Unmarshal([]byte(raw), &ts) != nil {
		return control.TargetStatus{}
	}
	return control.TargetStatus{Version: ts.Version}
}

var _ report.TargetProvider = storedTarget{}
