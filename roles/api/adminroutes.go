package api

import (
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/spool"
	apiadmin "github.com/edgeplat/edgeplat/roles/api/admin"
	eventlog "github.com/edgeplat/edgeplat/roles/api/events"
	"github.com/edgeplat/edgeplat/roles/api/extdash"
	"github.com/edgeplat/edgeplat/roles/api/retention"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

// retainers are the services that delete by age, whose retentions the
// system config changes at run time.
type retainers struct {
	events   *eventlog.Pruner
	readings *retention.Maintainer
	rollups  *rollup.Worker
}

// newSystemConfig builds the system config service, whose settings go to
// the access layer's rate limits, the pipeline's de-duplication TTL, the
// retentions and the process's log level (docs/system-config.md). With
// r.Level nil (a runtime not built by cmd) the log level stays as built.
func newSystemConfig(cfg *config.Config, r *rt.Runtime, b rt.Backends, acc *access, pipe *pipeline, keep retainers) *apiadmin.SystemConfig {
	return apiadmin.NewSystemConfig(apiadmin.SystemConfigOptions{
		Base: apiadmin.FromConfig(cfg),
		DB:   b.DB,
		Apply: func(s apiadmin.Settings) {
			acc.applyLimits(s)
			pipe.setDedupTTL(s.DedupTTL)
			keep.events.SetRetention(s.EventsRetention)
			keep.readings.SetRetention(s.ReadingsRetention)
			keep.rollups.SetRetentions(s.RollupHourlyRetention, s.RollupDailyRetention)
			if r.Level != nil {
				r.Level.Set(s.SlogLevel())
			}
		},
		Log: r.Component("api-system-config"),
	})
}

// registerAdmin adds the admin routes (roles/api/admin) to protected.
func registerAdmin(protected gin.IRoutes, r *rt.Runtime, b rt.Backends, acc *access, pipe *pipeline, client *mqttx.Client, sc *apiadmin.SystemConfig) {
	apiadmin.Register(protected, apiadmin.Deps{
		Config: sc,
		Health: apiadmin.Probes{
			DB:      b.DB,
			Streams: b.Streams,
			Broker:  client.Stats,
			Spool:   pipe.spoolStats,
			Breaker: func() string { return pipe.breaker.State().String() },
			Licence: acc.licence.Status,
		},
		Caller:     caller,
		WriteError: WriteError,
		Audit:      acc.audit,
		AdminGate:  acc.adminGate(),
		Log:        r.Component("api-admin"),
	})
}

// registerExtDash adds the external dashboards routes
// (roles/api/extdash); without api.grafana_url they answer 503.
func registerExtDash(protected gin.IRoutes, cfg *config.Config, r *rt.Runtime, acc *access) error {
	var grafana *extdash.Client
	if cfg.API.GrafanaURL != "" {
		c, err := extdash.NewClient(cfg.API.GrafanaURL, cfg.API.GrafanaToken.Reveal(), nil)
		if err != nil {
			return fmt.Errorf("%s: %w", config.Label("api.grafana_url"), err)
		}
		grafana = c
	}
	extdash.Register(protected, extdash.Deps{Grafana: grafana, Caller: caller, WriteError: WriteError, Audit: acc.audit,
		AdminGate: acc.adminGate(), Log: r.Component("api-extdash")})
	return nil
}

// applyLimits puts the rate limits of s into effect: the auth limit
// counts refused credentials and failed logins too, as at start.
func (a *access) applyLimits(s apiadmin.Settings) {
	a.global.SetLimit(s.RateLimitGlobal)
	a.authLimit.SetLimit(s.RateLimitAuth)
	a.auth.failures.SetLimit(s.RateLimitAuth)
	a.attempts.SetLimits(s.RateLimitAuth, s.RateLimitAuth)
	a.admin.SetLimit(s.RateLimitAdmin)
	a.device.SetLimit(s.RateLimitDevice)
}

// adminGate is the admin rate limit, as the access routes use it.
func (a *access) adminGate() gin.HandlerFunc { return httpx.RateLimit(a.admin, adminKey, WriteError) }

// spoolStats reports the disk spool's figures; false when there is none
// (spool.enabled off, or not opened yet).
func (p *pipeline) spoolStats() (spool.Stats, bool) {
	if p.spool == nil {
		return spool.Stats{}, false
	}
	return p.spool.Stats(), true
}
