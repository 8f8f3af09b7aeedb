package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/roles/api/command"
	"github.com/edgeplat/edgeplat/roles/api/device"
	"github.com/edgeplat/edgeplat/roles/api/jobs"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// jobTargets resolves a job's targets in the agent registry.
type jobTargets struct{ agents *registry.Store }

func (j jobTargets) Owned(ctx context.Context, tenant string, uuids []string) (map[string]bool, error) {
	return j.agents.Owned(ctx, tenant, uuids)
}

func (j jobTargets) FleetMembers(ctx context.Context, tenant, fleetID string) ([]string, error) {
	return j.agents.FleetMembers(ctx, tenant, fleetID)
}

// AgentsMatching runs the tag query of POST /agents/query.
func (j jobTargets) AgentsMatching(ctx context.Context, tenant string, tags map[string]json.RawMessage) ([]string, error) {
	conds, err := registry.ParseTagQuery(tags)
	if err != nil {
		return nil, err
	}
	list, err := j.agents.AgentsMatching(ctx, tenant, conds)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.UUID
	}
	return out, nil
}

// jobsDeps is what the jobs routes and scheduler get from the role: the
// registry for targets, the command publisher for dispatches and
// cancels, the device key check for the agent routes, the audit log and
// the live channel.
func (a *access) jobsDeps(cmds *command.Publisher) jobs.Deps {
	return jobs.Deps{
		DB:         a.b.DB,
		Targets:    jobTargets{agents: a.agents},
		IsNotFound: func(err error) bool { return errors.Is(err, registry.ErrNotFound) },
		IsInvalid:  func(err error) bool { return errors.Is(err, registry.ErrInvalid) },
		Publisher:  cmds,
		Caller:     caller,
		WriteError: WriteError,
		Audit:      a.audit,
		Record:     a.accounts.Record,
		AdminGate:  httpx.RateLimit(a.admin, adminKey, WriteError),
		DeviceAuth: device.Authenticator(a.deviceDeps()),
		Device: func(c *gin.Context) (string, string, bool) {
			d := device.From(c)
			return d.TenantUUID, d.AgentUUID, d.AgentUUID != ""
		},
		Streams:    a.b.Streams,
		Log:        a.r.Component("api-jobs"),
		Registerer: a.r.Metrics,
	}
}

// fleetChannel is the tenant's live channel of fleet changes; tenant is
// the 22-character key, as for the status channels.
func fleetChannel(tenant string) string { return "tenant:" + tenant + ":fleets" }

// publishFleetEvents puts every committed fleet usage event on the
// tenant's fleet channel, which GET /agents/events relays. Delivery is
// best effort, like the other live channels: the usage events table is
// the record.
func publishFleetEvents(agents *registry.Store, streams streamstore.Store, log *slog.Logger) {
	agents.OnFleetEvent(func(tenant string, ev registry.FleetEvent) {
		tu, err := codec.ParseUUID(tenant)
		if err != nil {
			log.Error("fleet event not published: tenant id", "tenant", tenant, "err", err)
			return
		}
		payload, err := json.Marshal(ev)
		if err != nil {
			log.Error("fleet event not published", "err", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := streams.Publish(ctx, fleetChannel(codec.EncodeID(tu)), payload); err != nil {
			log.Warn("fleet event not published on the live channel", "fleet", ev.FleetID, "kind", ev.Kind, "err", err)
		}
	})
}
