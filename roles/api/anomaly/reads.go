package anomaly

import (
	"context"
	"time"
)

// IncidentQuery selects incidents for Incidents; empty fields do not
// filter.
type IncidentQuery struct {
	// Status is "open", "closed" or "" for both.
	Status string
	// Agent is a canonical lowercase agent UUID.
	Agent string
	Since time.Time
	// Limit is 1..MaxIncidentLimit; anything else is DefaultIncidentLimit.
	Limit int
}

// Incidents lists tenant's incidents (tenant a tenant UUID, from the
// caller's credential), newest first, as GET /anomaly/incidents does, for
// callers inside the role that have no request of their own.
func (x *Anomaly) Incidents(ctx context.Context, tenant string, q IncidentQuery) ([]Incident, error) {
	limit := q.Limit
	if limit < 1 || limit > MaxIncidentLimit {
		limit = DefaultIncidentLimit
	}
	return x.s.incidents(ctx, incidentFilter{tenant: tenant, status: q.Status, agent: q.Agent, since: q.Since, limit: limit})
}
