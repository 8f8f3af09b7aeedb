package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
)

// System is the device and the agent process: logs, host figures, memory,
// the store's statistics.
type System interface {
	// Logs queries the log ring; the arguments are the query's, and a
	// wrong one is an *Error naming it.
	Logs(level, source, since, limit string) (any, error)
	Dashboard(ctx context.Context) (any, error)
	Memory() (any, error)
	DBStats(ctx context.Context) (any, error)
	// Device is GET /v1/device.
	Device(ctx context.Context) any
}

// systemRoutes are the handlers of one resource group.
type systemRoutes struct{ routes }

// RegisterSystem adds the logs, dashboard, memory, database and device
// routes.
func RegisterSystem(g *gin.RouterGroup, d Deps) {
	r := systemRoutes{routes{Deps: d}}
	g.GET("/logs", r.getLogs)
	g.GET("/dashboard/stats", r.dashboardStats)
	g.GET("/memory", r.memoryDiagnostics)
	g.GET("/db/stats", r.dbStats)
	g.GET("/device", r.device)
}

func (r systemRoutes) getLogs(c *gin.Context) {
	logs, err := r.System.Logs(c.Query("level"), c.Query("source"), c.Query("since"), c.Query("limit"))
	r.reply(c, http.StatusOK, "read logs", logs, err)
}

func (r systemRoutes) dashboardStats(c *gin.Context) {
	d, err := r.System.Dashboard(c.Request.Context())
	r.reply(c, http.StatusOK, "read host figures", d, err)
}

func (r systemRoutes) memoryDiagnostics(c *gin.Context) {
	m, err := r.System.Memory()
	r.reply(c, http.StatusOK, "read memory figures", m, err)
}

func (r systemRoutes) dbStats(c *gin.Context) {
	s, err := r.System.DBStats(c.Request.Context())
	r.reply(c, http.StatusOK, "database stats", s, err)
}

func (r systemRoutes) device(c *gin.Context) {
	c.JSON(http.StatusOK, r.System.Device(c.Request.Context()))
}
