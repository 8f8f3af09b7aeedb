package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/agent/logring"
	"github.com/gin-gonic/gin"
)

// logRingCapacity bounds the log lines GET /v1/logs can return.
const logRingCapacity = 5000

// settingsView is GET /v1/settings: the settings plus the read-only agent
// group, which reports the cloud the agent really uses.
func (a *Agent) settingsView(ctx context.Context) gin.H {
	s := *a.settings.Load()
	agent := gin.H{"uuid": "", "name": "", "version": a.version(), "provisioned": false, "apiEndpoint": "", "mqttBrokerUrl": ""}
	if id := a.identity.Load(); id != nil {
		agent["uuid"], agent["name"] = id.UUID, id.Name
	}
	if st := a.st.Load(); st != nil {
		if cr, err := a.credentials(ctx, st); err == nil && cr != nil {
			agent["provisioned"] = a.provisioned(ctx, st)
			agent["apiEndpoint"], agent["mqttBrokerUrl"] = cr.APIEndpoint, cr.MQTT.BrokerURL
		}
	}
	return gin.H{"settings": gin.H{"logging": s.Logging, "intervals": s.Intervals, "runtime": s.Runtime, "agent": agent}}
}

func (a *Agent) getSettings(c *gin.Context) {
	c.JSON(http.StatusOK, a.settingsView(c.Request.Context()))
}

func (a *Agent) patchSettings(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	body, ok := readBody(c)
	if !ok {
		return
	}
	a.settingsMu.Lock()
	defer a.settingsMu.Unlock()
	merged, ignored, err := mergeSettings(*a.settings.Load(), body, false)
	if err != nil {
		badRequest(c, err)
		return
	}
	doc, err := json.Marshal(merged)
	if err != nil {
		a.internal(c, "encode settings", err)
		return
	}
	if err := st.SaveSettings(c.Request.Context(), doc); err != nil {
		a.internal(c, "save settings", err)
		return
	}
	a.applySettings(merged)
	if len(ignored) > 0 {
		a.log.Info("settings keys ignored", "keys", ignored)
	}
	c.JSON(http.StatusOK, a.settingsView(c.Request.Context()))
}

func (a *Agent) getLogs(c *gin.Context) {
	f, err := logring.ParseFilter(c.Query("level"), c.Query("source"), c.Query("since"), c.Query("limit"))
	if err != nil {
		fail(c, http.StatusBadRequest, "%v", err)
		return
	}
	logs, total := a.ring.Query(f)
	c.JSON(http.StatusOK, gin.H{"logs": logs, "total": total})
}

func (a *Agent) dashboardStats(c *gin.Context) {
	d, err := a.sampler.Sample(c.Request.Context())
	if err != nil {
		a.internal(c, "read host figures", err)
		return
	}
	c.JSON(http.StatusOK, d)
}

func (a *Agent) memoryDiagnostics(c *gin.Context) {
	m, err := a.memory.Snapshot()
	if err != nil {
		a.internal(c, "read memory figures", err)
		return
	}
	c.JSON(http.StatusOK, m)
}

func (a *Agent) dbStats(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	s, err := st.Stats(c.Request.Context())
	if err != nil {
		a.internal(c, "database stats", err)
		return
	}
	c.JSON(http.StatusOK, s)
}

// device is GET /v1/device. is_online stays false until the agent keeps a
// connection to the cloud (publishing).
func (a *Agent) device(c *gin.Context) {
	state, _ := a.snapshot()
	d := gin.H{"uuid": "", "name": "", "provisioned": false, "apiEndpoint": "", "apps": 0,
		"is_online": false, "status": strings.ToLower(state)}
	if id := a.identity.Load(); id != nil {
		d["uuid"], d["name"] = id.UUID, id.Name
	}
	if st := a.st.Load(); st != nil {
		ctx := c.Request.Context()
		if cr, err := a.credentials(ctx, st); err == nil && cr != nil {
			d["provisioned"], d["apiEndpoint"] = a.provisioned(ctx, st), cr.APIEndpoint
		}
		d["mode"] = a.mode(ctx, st)
		d["is_online"] = d["mode"] == "provisioned-online"
	}
	c.JSON(http.StatusOK, d)
}

func readBody(c *gin.Context) ([]byte, bool) {
	return httpx.ReadBody(c, maxBody, WriteError)
}
