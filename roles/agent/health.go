package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/apps"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

// healthCheck gathers the subsystems' health.
type healthCheck struct {
	st        *storeRef
	memory    *sysinfo.MemoryMonitor
	endpoints *endpointService
	// parts gives the apps service, built after the health check.
	parts *parts
}

// check reports the subsystems and the failed phases. A device that is
// offline is the device's problem, not the agent's, so endpoint
// connectivity is reported per endpoint and not here.
func (h *healthCheck) check(ctx context.Context, state string, phases []PhaseResult) httpapi.Health {
	out := httpapi.Health{State: state, Ready: state == StateRunning, RunState: h.endpoints.runState(),
		Critical: []string{}, Unhealthy: []string{}, Phases: phases}
	for _, p := range phases {
		if !p.Healthy && p.Attempts > 0 {
			out.Critical = append(out.Critical, p.Name+": "+p.Error)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	storeSub := httpapi.Subsystem{Name: "store", Healthy: true}
	if s := h.st.Load(); s == nil {
		storeSub.Healthy, storeSub.Error = state != StateRunning, "not open"
		if state == StateInitializing {
			// Not open yet is expected while initialising.
			storeSub.Healthy = true
		}
	} else if c := s.Condition(ctx); !c.Healthy {
		// A full disk, a damaged file, or a corrupt copy moved aside at
		// start: each loses data quietly unless reported here.
		storeSub.Healthy, storeSub.Error = false, c.Reason
	}
	memSub := httpapi.Subsystem{Name: "memory", Healthy: true}
	if mem, err := h.memory.Snapshot(); err != nil {
		memSub.Healthy, memSub.Error = false, err.Error()
	} else if mem.Diagnostics.LeakSuspected {
		memSub.Healthy, memSub.Error = false, "the live heap has grown at every sample; a leak is suspected"
	}
	out.Subsystems = []httpapi.Subsystem{
		{Name: "lifecycle", Healthy: len(out.Critical) == 0},
		storeSub,
		// Endpoints the cloud stopped are its choice, not a fault:
		// RunState says so, and the subsystem stays healthy.
		{Name: "endpoints", Healthy: true},
		{Name: "api", Healthy: true},
		memSub,
	}
	if a := h.parts.apps; a != nil && a.mgr.HasWork() {
		// A runtime that is down stops the apps, not the agent's
		// protocol work: degraded, not unhealthy.
		rs := a.mgr.RuntimeState()
		sub := httpapi.Subsystem{Name: "apps-runtime", Healthy: true}
		if rs.Status != apps.StatusConnected {
			sub.Degraded, sub.Error = true, "container runtime "+rs.Status+": "+rs.Error
		}
		out.Subsystems = append(out.Subsystems, sub)
	}
	for _, s := range out.Subsystems {
		if !s.Healthy {
			out.Unhealthy = append(out.Unhealthy, s.Name)
		}
	}
	return out
}

// selfCheckClient closes its connection after the answer: a kept-alive
// connection to the agent's own server, or one the transport dialed and
// parked unused, would be counted by the server's shutdown as busy for
// 5 s, the whole grace period.
var selfCheckClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// selfCheck asks the API for /ping on its own address.
func selfCheck(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("api self-check: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/ping", nil)
	if err != nil {
		return fmt.Errorf("api self-check: %w", err)
	}
	resp, err := selfCheckClient.Do(req)
	if err != nil {
		return fmt.Errorf("api self-check: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("api self-check: GET /ping answered %s", resp.Status)
	}
	return nil
}
