package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Lifecycle is the agent's state, health and restarts.
type Lifecycle interface {
	// Health checks the subsystems and reports the init phases.
	Health(ctx context.Context) Health
	// Reboot asks for a soft reboot; it reports false, with the state,
	// when the agent is not RUNNING.
	Reboot() (state string, ok bool)
	// Shutdown asks the agent to stop.
	Shutdown()
}

// Health is the agent's health at one moment.
type Health struct {
	State string `json:"state"`
	Ready bool   `json:"ready"`
	// RunState is "running", or "stopped" while the cloud's target
	// state stops the endpoints (docs/target-state.md, section Run
	// state).
	RunState   string      `json:"runState"`
	Subsystems []Subsystem `json:"subsystems"`
	// Unhealthy names the subsystems that are not healthy.
	Unhealthy []string `json:"unhealthySubsystems"`
	// Critical are the failed init phases, "phase: error".
	Critical []string `json:"criticalFailures"`
	Phases   []Phase  `json:"phases"`
}

// Overall is whether nothing is unhealthy and no phase failed.
func (h Health) Overall() bool { return len(h.Unhealthy) == 0 && len(h.Critical) == 0 }

// Subsystem is one line of the health report.
type Subsystem struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	// Degraded is a healthy subsystem that works in part: the container
	// runtime of the apps is down while protocol work goes on.
	Degraded bool   `json:"degraded,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Phase records one init phase.
type Phase struct {
	Name       string  `json:"name"`
	Healthy    bool    `json:"healthy"`
	DurationMS float64 `json:"durationMs"`
	Error      string  `json:"error,omitempty"`
	Attempts   int     `json:"attempts"`
}

// probeRoutes are the handlers of one resource group.
type probeRoutes struct{ routes }

// RegisterProbes adds the open probes: /v1/healthy and /v1/readiness.
func RegisterProbes(g *gin.RouterGroup, d Deps) {
	r := probeRoutes{routes{Deps: d}}
	g.GET("/healthy", r.healthy)
	g.GET("/readiness", r.readiness)
}

// RegisterHealth adds the health report, reboot and shutdown.
func RegisterHealth(g *gin.RouterGroup, d Deps) {
	r := probeRoutes{routes{Deps: d}}
	g.GET("/health/report", r.healthReport)
	g.POST("/reboot", r.reboot)
	g.POST("/shutdown", r.shutdown)
}

func (r probeRoutes) healthy(c *gin.Context) {
	h := r.Lifecycle.Health(c.Request.Context())
	if h.Overall() {
		c.JSON(http.StatusOK, gin.H{"status": "healthy", "ready": h.Ready, "state": h.State})
		return
	}
	c.JSON(http.StatusInternalServerError, gin.H{"status": "unhealthy", "ready": h.Ready, "state": h.State,
		"criticalFailures": h.Critical, "unhealthySubsystems": h.Unhealthy})
}

func (r probeRoutes) readiness(c *gin.Context) {
	h := r.Lifecycle.Health(c.Request.Context())
	if h.Ready {
		c.JSON(http.StatusOK, gin.H{"ready": true, "state": h.State})
		return
	}
	c.JSON(http.StatusServiceUnavailable, gin.H{"ready": false, "state": h.State, "criticalFailures": h.Critical})
}

func (r probeRoutes) healthReport(c *gin.Context) {
	h := r.Lifecycle.Health(c.Request.Context())
	overall := h.Overall()
	c.JSON(http.StatusOK, gin.H{
		"overall": overall, "ready": h.Ready, "state": h.State, "runState": h.RunState,
		"report": gin.H{"overall": overall, "subsystems": h.Subsystems, "unhealthySubsystems": h.Unhealthy,
			"criticalFailures": h.Critical, "phases": h.Phases},
	})
}

func (r probeRoutes) reboot(c *gin.Context) {
	state, ok := r.Lifecycle.Reboot()
	if !ok {
		c.AbortWithStatusJSON(http.StatusConflict, gin.H{"error": "reboot is only allowed in state RUNNING",
			"state": state, "hint": "wait until GET /v1/readiness answers 200, then retry"})
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"Data": "OK", "Error": "", "state": state})
}

func (r probeRoutes) shutdown(c *gin.Context) {
	r.Log.Info("shutdown requested through the API")
	r.Lifecycle.Shutdown()
	c.JSON(http.StatusAccepted, gin.H{"Data": "OK", "Error": ""})
}
