package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

type metrics struct {
	executions *prometheus.CounterVec
	active     prometheus.Gauge
}

// newMetrics registers the package's collectors. Register and
// NewScheduler both build a core on the same registerer: the second finds
// the first one's collectors and shares them.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_api_job_executions_total",
			Help: "Job executions that entered each status (queued at dispatch, then each move).",
		}, []string{"status"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeplat_api_jobs_active",
			Help: "Jobs in progress in the database, as the scheduler last counted them.",
		}),
	}
	if reg == nil {
		return m
	}
	m.executions = register(reg, m.executions)
	m.active = register(reg, m.active)
	return m
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	if err != nil {
		panic("BUG: register job metrics: " + err.Error())
	}
	return c
}

// Channel is the pub/sub channel of a tenant's job events, which
// GET /agents/events relays. tenant is the 22-character id
// (codec.EncodeID), as the agents' status channels take it.
func Channel(tenant string) string { return "tenant:" + tenant + ":jobs" }

// Event is one job or execution status change on the live channel.
// AgentUUID is empty for a job's own status.
type Event struct {
	JobID        string    `json:"jobId"`
	AgentUUID    string    `json:"agentUuid,omitempty"`
	Status       string    `json:"status"`
	StatusReason string    `json:"statusReason,omitempty"`
	At           time.Time `json:"at"`
}

// Audit event kinds. An execution's move is recorded as
// "job.execution.<status>".
const (
	AuditJobCreated      = "job.created"
	AuditJobCancelled    = "job.cancelled"
	AuditJobAborted      = "job.aborted"
	AuditJobCompleted    = "job.completed"
	AuditExecutionPrefix = "job.execution."
	AuditTemplateCreated = "job_template.created"
	AuditTemplateUpdated = "job_template.updated"
	AuditTemplateDeleted = "job_template.deleted"
	systemActor          = "edgeplat-api"
	actorKindSystem      = "system"
	actorKindUser        = "user"
	actorKindAgent       = "agent"
)

// change is one move to announce: an execution's (agent set) or a job's.
type change struct {
	tenant, job, agent string
	status, reason     string
	// released: the agent was handed the execution, so a cancel must
	// reach it as a CmdJobCancel.
	released bool
	// quiet: the move follows a job-level cancel or abort, whose own
	// audit record stands for it.
	quiet bool
	at    time.Time
}

// recorder writes an audit event: the request's Deps.Audit, or
// Deps.Record for the scheduler.
type recorder func(accounts.Event)

// announce counts, publishes and records the moves, and sends
// CmdJobCancel to agents whose cancelled execution was released. It runs
// after the moves are committed.
func (c *core) announce(ctx context.Context, rec recorder, actor, actorKind string, changes []change) {
	for _, ch := range changes {
		if ch.agent != "" {
			c.m.executions.WithLabelValues(ch.status).Inc()
		}
		c.publishEvent(ctx, ch.tenant, Event{JobID: ch.job, AgentUUID: ch.agent, Status: ch.status, StatusReason: ch.reason, At: ch.at})
		if ch.agent != "" && ch.released && (ch.status == string(control.ExecCancelled) || ch.status == string(control.ExecTimedOut)) {
			c.sendCancel(ch.tenant, ch.agent, ch.job)
		}
		if ch.quiet || rec == nil {
			continue
		}
		kind := AuditExecutionPrefix + ch.status
		target := ch.job
		detail := map[string]any{"jobId": ch.job}
		if ch.agent == "" {
			switch ch.status {
			case JobCancelled:
				kind = AuditJobCancelled
			case JobAborted:
				kind = AuditJobAborted
			case JobCompleted:
				kind = AuditJobCompleted
			default:
				continue
			}
		} else {
			target = ch.agent
		}
		if ch.reason != "" {
			detail["statusReason"] = ch.reason
		}
		rec(accounts.Event{Tenant: ch.tenant, At: ch.at, Kind: kind, Actor: actor, ActorKind: actorKind, Target: target, Detail: detail})
	}
}

// systemRecorder records through Deps.Record, logging a failure: the move
// it describes has happened.
func (c *core) systemRecorder(ctx context.Context) recorder {
	return func(e accounts.Event) {
		if err := c.Record(ctx, e); err != nil {
			c.Log.Warn("record job event", "kind", e.Kind, "err", err)
		}
	}
}

func (c *core) publishEvent(ctx context.Context, tenant string, ev Event) {
	if c.Streams == nil {
		return
	}
	tu, err := codec.ParseUUID(tenant)
	if err != nil {
		return
	}
	payload, _ := json.Marshal(ev)
	if err := c.Streams.Publish(ctx, Channel(codec.EncodeID(tu)), payload); err != nil {
		c.Log.Warn("publish job event", "job", ev.JobID, "err", err)
	}
}

func (c *core) sendCancel(tenant, agent, job string) {
	payload, _ := json.Marshal(control.JobCancel{JobID: job})
	c.publish(tenant, agent, control.CmdJobCancel, payload)
}

func (c *core) publish(tenant, agent, name string, payload []byte) {
	tu, err1 := codec.ParseUUID(tenant)
	au, err2 := codec.ParseUUID(agent)
	if err := errors.Join(err1, err2); err != nil {
		panic("BUG: a stored tenant or agent is not a UUID: " + err.Error())
	}
	if err := c.Publisher.Publish(tu, au, name, payload); err != nil {
		c.Log.Error("publish job command", "command", name, "agent", agent, "err", err)
	}
}
