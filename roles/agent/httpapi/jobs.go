package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Jobs is the job executions the agent received (docs/agent.md, section
// Jobs), read-only: the cloud dispatches and cancels them.
type Jobs interface {
	// Recent returns up to limit executions, newest first.
	Recent(ctx context.Context, limit int) (any, error)
}

// Limits of GET /v1/jobs?limit=.
const (
	defaultJobsLimit = 50
	maxJobsLimit     = 500
)

type jobRoutes struct{ routes }

// RegisterJobs adds GET /v1/jobs.
func RegisterJobs(g *gin.RouterGroup, d Deps) {
	r := jobRoutes{routes{Deps: d}}
	g.GET("/jobs", r.list)
}

func (r jobRoutes) list(c *gin.Context) {
	limit, ok := queryLimit(c, defaultJobsLimit, maxJobsLimit)
	if !ok {
		return
	}
	jobs, err := r.Jobs.Recent(c.Request.Context(), limit)
	r.reply(c, http.StatusOK, "list jobs", gin.H{"jobs": jobs}, err)
}
