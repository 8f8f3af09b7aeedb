package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Settings are the agent's adjustable settings.
type Settings interface {
	// View is GET /v1/settings: the settings and the read-only agent
	// group.
	View(ctx context.Context) any
	// Patch merges a partial settings document, stores and applies it;
	// a wrong value is an *Error naming it.
	Patch(ctx context.Context, doc []byte) error
}

// settingsRoutes are the handlers of one resource group.
type settingsRoutes struct{ routes }

// RegisterSettings adds GET and PATCH /v1/settings.
func RegisterSettings(g *gin.RouterGroup, d Deps) {
	r := settingsRoutes{routes{Deps: d}}
	g.GET("/settings", r.getSettings)
	g.PATCH("/settings", r.patchSettings)
}

func (r settingsRoutes) getSettings(c *gin.Context) {
	c.JSON(http.StatusOK, r.Settings.View(c.Request.Context()))
}

func (r settingsRoutes) patchSettings(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	if err := r.Settings.Patch(c.Request.Context(), body); err != nil {
		r.respond(c, "save settings", err)
		return
	}
	c.JSON(http.StatusOK, r.Settings.View(c.Request.Context()))
}
