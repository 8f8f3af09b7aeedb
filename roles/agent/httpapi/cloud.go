package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Cloud is the agent's side of the cloud: provisioning, the target-state
// pull, and the factory reset that forgets the cloud with the rest.
type Cloud interface {
	// Provision runs the three-phase registration; a failed phase is an
	// *Error naming it.
	Provision(ctx context.Context, in ProvisionRequest) (device any, err error)
	ProvisionStatus(ctx context.Context) (any, error)
	// Deprovision leaves the cloud; message says what changed.
	Deprovision(ctx context.Context) (message string, err error)
	// Pull fetches the target state now; ErrNotProvisioned without a
	// cloud.
	Pull(ctx context.Context) (any, error)
	// FactoryReset deletes everything but the agent's UUID and restarts
	// its services.
	FactoryReset(ctx context.Context) error
}

// ProvisionRequest is the body of POST /v1/provision.
type ProvisionRequest struct {
	Key           string `json:"provisioningApiKey"`
	DeviceName    string `json:"deviceName"`
	DeviceType    string `json:"deviceType"`
	APIEndpoint   string `json:"apiEndpoint"`
	ApplicationID *int64 `json:"applicationId"`
}

// cloudRoutes are the handlers of one resource group.
type cloudRoutes struct{ routes }

// RegisterCloud adds provisioning, sync and the factory reset.
func RegisterCloud(g *gin.RouterGroup, d Deps) {
	r := cloudRoutes{routes{Deps: d}}
	g.POST("/provision", r.provision)
	g.GET("/provision/status", r.provisionStatus)
	g.POST("/deprovision", r.deprovision)
	g.POST("/sync/pull", r.syncPull)
	g.POST("/factory-reset", r.factoryReset)
}

func (r cloudRoutes) provision(c *gin.Context) {
	var in ProvisionRequest
	if !bind(c, &in) {
		return
	}
	dev, err := r.Cloud.Provision(c.Request.Context(), in)
	r.reply(c, http.StatusOK, "provision", gin.H{"success": true, "device": dev}, err)
}

func (r cloudRoutes) provisionStatus(c *gin.Context) {
	st, err := r.Cloud.ProvisionStatus(c.Request.Context())
	r.reply(c, http.StatusOK, "provision status", st, err)
}

func (r cloudRoutes) deprovision(c *gin.Context) {
	msg, err := r.Cloud.Deprovision(c.Request.Context())
	r.reply(c, http.StatusOK, "deprovision", gin.H{"message": msg, "status": "deprovisioned"}, err)
}

// syncPull is POST /v1/sync/pull: one pull now. Not being provisioned is
// an error object in a 200 answer (docs/agent.md, section Provisioning).
func (r cloudRoutes) syncPull(c *gin.Context) {
	res, err := r.Cloud.Pull(c.Request.Context())
	if errors.Is(err, ErrNotProvisioned) {
		c.JSON(http.StatusOK, gin.H{"error": ErrNotProvisioned.Error(), "provisioned": false})
		return
	}
	r.reply(c, http.StatusOK, "pull", res, err)
}

func (r cloudRoutes) factoryReset(c *gin.Context) {
	err := r.Cloud.FactoryReset(c.Request.Context())
	r.reply(c, http.StatusOK, "factory reset",
		gin.H{"message": "all data deleted except the agent UUID; the agent restarts its services", "status": "factory-reset"}, err)
}
