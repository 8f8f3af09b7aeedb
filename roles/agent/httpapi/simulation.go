package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Simulation is the simulation mode's orchestrator (docs/simulation.md).
// Deps.Simulation is nil while agent.simulation_mode is off, and then
// every simulation route answers 404 naming the setting.
type Simulation interface {
	// StartScenario starts a scenario's simulated devices with seed (nil:
	// the default seed) and returns the scenario's status.
	StartScenario(ctx context.Context, name string, seed *uint64) (any, error)
	// StopScenario stops a running scenario and returns its status.
	StopScenario(ctx context.Context, name string) (any, error)
	// StopAll stops every running scenario and returns their names.
	StopAll(ctx context.Context) []string
	// Statuses lists every scenario.
	Statuses(ctx context.Context) any
}

// simulationOff is the 404 of every simulation route while the mode is off.
const simulationOff = "simulation mode is off: the /v1/simulation routes answer only with agent.simulation_mode on (SIMULATION_MODE=true)"

type simulationRoutes struct{ routes }

// RegisterSimulation adds the simulation routes.
func RegisterSimulation(g *gin.RouterGroup, d Deps) {
	r := simulationRoutes{routes{Deps: d}}
	s := g.Group("/simulation", r.on)
	s.GET("/status", r.status)
	s.POST("/scenarios/:scenario/start", r.start)
	s.POST("/scenarios/:scenario/stop", r.stop)
	s.POST("/stop-all", r.stopAll)
}

// on answers 404 while simulation mode is off.
func (r simulationRoutes) on(c *gin.Context) {
	if r.Simulation == nil {
		fail(c, http.StatusNotFound, simulationOff)
	}
}

func (r simulationRoutes) status(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"scenarios": r.Simulation.Statuses(c.Request.Context())})
}

// start takes an optional body {seed}; without one the default seed
// makes every start of a scenario produce the same values.
func (r simulationRoutes) start(c *gin.Context) {
	in := struct {
		Seed *uint64 `json:"seed"`
	}{}
	if c.Request.ContentLength != 0 && !bind(c, &in) {
		return
	}
	name := c.Param("scenario")
	st, err := r.Simulation.StartScenario(c.Request.Context(), name, in.Seed)
	r.reply(c, http.StatusOK, "start scenario", gin.H{"message": "scenario " + name + " started", "status": st}, err)
}

func (r simulationRoutes) stop(c *gin.Context) {
	name := c.Param("scenario")
	st, err := r.Simulation.StopScenario(c.Request.Context(), name)
	r.reply(c, http.StatusOK, "stop scenario", gin.H{"message": "scenario " + name + " stopped", "status": st}, err)
}

func (r simulationRoutes) stopAll(c *gin.Context) {
	ctx := c.Request.Context()
	stopped := r.Simulation.StopAll(ctx)
	c.JSON(http.StatusOK, gin.H{"message": "every scenario stopped", "stopped": stopped,
		"status": gin.H{"scenarios": r.Simulation.Statuses(ctx)}})
}
