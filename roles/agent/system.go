package agent

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/edgeplat/edgeplat/core/buildinfo"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/logring"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

func version() string { return buildinfo.Get().Version }

// systemService is httpapi.System.
type systemService struct {
	st      *storeRef
	id      *atomic.Pointer[identity]
	ring    *logring.Ring
	sampler *sysinfo.Sampler
	memory  *sysinfo.MemoryMonitor
	cloud   *cloudService
	lc      *Agent
	apps    *appsService
}

func (s *systemService) Logs(level, source, since, limit string) (any, error) {
	f, err := logring.ParseFilter(level, source, since, limit)
	if err != nil {
		return nil, httpapi.Errorf(http.StatusBadRequest, "%v", err)
	}
	logs, total := s.ring.Query(f)
	return map[string]any{"logs": logs, "total": total}, nil
}

func (s *systemService) Dashboard(ctx context.Context) (any, error) { return s.sampler.Sample(ctx) }

func (s *systemService) Memory() (any, error) { return s.memory.Snapshot() }

func (s *systemService) DBStats(ctx context.Context) (any, error) {
	st, err := s.st.Open()
	if err != nil {
		return nil, err
	}
	return st.Stats(ctx)
}

// Device is GET /v1/device; is_online follows the agent mode.
func (s *systemService) Device(ctx context.Context) any {
	state, _ := s.lc.snapshot()
	d := map[string]any{"uuid": "", "name": "", "provisioned": false, "apiEndpoint": "", "apps": s.apps.count(),
		"is_online": false, "status": strings.ToLower(state)}
	if id := s.id.Load(); id != nil {
		d["uuid"], d["name"] = id.UUID, id.Name
	}
	if st := s.st.Load(); st != nil {
		if cr, err := credentials(ctx, st); err == nil && cr != nil {
			d["provisioned"], d["apiEndpoint"] = provisioned(ctx, st), cr.APIEndpoint
		}
		d["mode"] = s.cloud.mode(ctx, st)
		d["is_online"] = d["mode"] == "provisioned-online"
	}
	return d
}
