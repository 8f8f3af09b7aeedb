package agent

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// subsystem is one line of the health report.
type subsystem struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
}

// check gathers the subsystems' health and the failed phases. A device
// that is offline is the device's problem, not the agent's, so endpoint
// connectivity is reported per endpoint and not here.
func (a *Agent) check(ctx context.Context) (state string, ready bool, subs []subsystem, unhealthy, critical []string) {
	state, phases := a.snapshot()
	ready = state == StateRunning
	critical = []string{}
	unhealthy = []string{}
	for _, p := range phases {
		if !p.Healthy && p.Attempts > 0 {
			critical = append(critical, p.Name+": "+p.Error)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	storeSub := subsystem{Name: "store", Healthy: true}
	if s := a.st.Load(); s == nil {
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
	memSub := subsystem{Name: "memory", Healthy: true}
	if mem, err := a.memory.Snapshot(); err != nil {
		memSub.Healthy, memSub.Error = false, err.Error()
	} else if mem.Diagnostics.LeakSuspected {
		memSub.Healthy, memSub.Error = false, "the live heap has grown at every sample; a leak is suspected"
	}
	subs = []subsystem{
		{Name: "lifecycle", Healthy: len(critical) == 0},
		storeSub,
		{Name: "endpoints", Healthy: true},
		{Name: "api", Healthy: true},
		memSub,
	}
	for _, s := range subs {
		if !s.Healthy {
			unhealthy = append(unhealthy, s.Name)
		}
	}
	return state, ready, subs, unhealthy, critical
}

func (a *Agent) healthy(c *gin.Context) {
	state, ready, _, unhealthy, critical := a.check(c.Request.Context())
	if len(unhealthy) == 0 && len(critical) == 0 {
		c.JSON(http.StatusOK, gin.H{"status": "healthy", "ready": ready, "state": state})
		return
	}
	c.JSON(http.StatusInternalServerError, gin.H{"status": "unhealthy", "ready": ready, "state": state,
		"criticalFailures": critical, "unhealthySubsystems": unhealthy})
}

func (a *Agent) readiness(c *gin.Context) {
	state, ready, _, _, critical := a.check(c.Request.Context())
	if ready {
		c.JSON(http.StatusOK, gin.H{"ready": true, "state": state})
		return
	}
	c.JSON(http.StatusServiceUnavailable, gin.H{"ready": false, "state": state, "criticalFailures": critical})
}

func (a *Agent) healthReport(c *gin.Context) {
	state, ready, subs, unhealthy, critical := a.check(c.Request.Context())
	_, phases := a.snapshot()
	overall := len(unhealthy) == 0 && len(critical) == 0
	c.JSON(http.StatusOK, gin.H{
		"overall": overall, "ready": ready, "state": state,
		"report": gin.H{"overall": overall, "subsystems": subs, "unhealthySubsystems": unhealthy,
			"criticalFailures": critical, "phases": phases},
	})
}

func (a *Agent) rebootRoute(c *gin.Context) {
	state, ok := a.requestReboot()
	if !ok {
		c.AbortWithStatusJSON(http.StatusConflict, gin.H{"error": "reboot is only allowed in state RUNNING",
			"state": state, "hint": "wait until GET /v1/readiness answers 200, then retry"})
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"Data": "OK", "Error": "", "state": state})
}

func (a *Agent) shutdownRoute(c *gin.Context) {
	a.log.Info("shutdown requested through the API")
	a.requestShutdown()
	c.JSON(http.StatusAccepted, gin.H{"Data": "OK", "Error": ""})
}
