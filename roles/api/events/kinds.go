package events

import (
	"fmt"
	"slices"
	"strings"
)

// Kinds of the events the log makes from its own sources; audit records
// keep their audit kind.
const (
	KindStateReport    = "agent.state_report"
	KindTargetVersion  = "target_state.version"
	KindIncidentOpened = "anomaly_incident.opened"
	KindIncidentClosed = "anomaly_incident.closed"
)

// auditKinds are the audit kinds the packages of the Cloud API record
// (docs/events.md lists them). A kind filter naming anything else is a
// mistake worth a 400 rather than an empty answer.
var auditKinds = []string{
	"agent.created", "agent.updated", "agent.deleted", "agent.registered", "agent.registration_failed",
	"agent.status", "agent.target_state",
	"anomaly_alert_rule.created", "anomaly_alert_rule.updated", "anomaly_alert_rule.deleted",
	"anomaly_incident.resolved", "anomaly_rule.created", "anomaly_rule.updated", "anomaly_rule.deleted",
	"api_key.created", "api_key.revoked",
	"auth.bootstrap_admin", "auth.login", "auth.login_failed", "auth.logout", "auth.password_changed",
	"auth.password_reset", "auth.refresh", "auth.refresh_reuse", "auth.register",
	"broker.denied", "broker_user.created", "broker_user.updated", "broker_user.deleted",
	"dashboard_layout.created", "dashboard_layout.updated", "dashboard_layout.deleted",
	"device_key.created", "device_key.revoked",
	"fleet.created", "fleet.updated", "fleet.deleted", "fleet.started", "fleet.stopped", "fleet.agent_added", "fleet.agent_removed",
	"invite.created", "invite.cancelled", "invite.accepted",
	"job.created", "job.cancelled", "job.aborted", "job.completed",
	"job_template.created", "job_template.updated", "job_template.deleted",
	"provisioning_key.created", "provisioning_key.deleted",
	"secret.set", "secret.deleted",
	"user.created", "user.updated", "user.deleted",
}

// auditPrefixes are audit kind families whose last part varies: a job
// execution's move is job.execution.<status>.
var auditPrefixes = []string{"job.execution."}

// ownKinds are the kinds of the log's own sources, by source.
var ownKinds = map[source][]string{
	srcSnapshot:       {KindStateReport},
	srcTargetVersion:  {KindTargetVersion},
	srcIncidentOpened: {KindIncidentOpened},
	srcIncidentClosed: {KindIncidentClosed},
}

// MaxKinds bounds the kinds one filter names.
const MaxKinds = 20

// kindFilter selects events by kind: exact kinds, and families written
// "family.*" (every kind before whose first dot is family).
type kindFilter struct {
	exact    []string
	families []string // with the trailing dot: "job."
}

func (f kindFilter) empty() bool { return len(f.exact) == 0 && len(f.families) == 0 }

// match reports whether the filter lets kind through; an empty filter
// lets everything through.
func (f kindFilter) match(kind string) bool {
	if f.empty() || slices.Contains(f.exact, kind) {
		return true
	}
	for _, p := range f.families {
		if strings.HasPrefix(kind, p) {
			return true
		}
	}
	return false
}

// knownFamily reports whether some kind of the log is in family.
func knownFamily(family string) bool {
	all := append(slices.Clone(auditKinds), KindStateReport, KindTargetVersion, KindIncidentOpened, KindIncidentClosed)
	all = append(all, auditPrefixes...)
	for _, k := range all {
		if strings.HasPrefix(k, family+".") {
			return true
		}
	}
	return false
}

// knownKind reports whether kind is one the log can hold.
func knownKind(kind string) bool {
	if slices.Contains(auditKinds, kind) || kind == KindStateReport || kind == KindTargetVersion ||
		kind == KindIncidentOpened || kind == KindIncidentClosed {
		return true
	}
	for _, p := range auditPrefixes {
		if rest, ok := strings.CutPrefix(kind, p); ok && rest != "" && !strings.ContainsAny(rest, ".*%_ ") {
			return true
		}
	}
	return false
}

// parseKinds reads the kind parameter: kinds and "family.*", separated by
// commas.
func parseKinds(s string) (kindFilter, error) {
	var f kindFilter
	if s == "" {
		return f, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxKinds {
		return f, fmt.Errorf("kind names %d kinds, at most %d", len(parts), MaxKinds)
	}
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if family, ok := strings.CutSuffix(p, ".*"); ok {
			if !knownFamily(family) {
				return kindFilter{}, fmt.Errorf("kind %q names no family of event kinds (docs/events.md lists them)", clip(p))
			}
			f.families = append(f.families, family+".")
			continue
		}
		if !knownKind(p) {
			return kindFilter{}, fmt.Errorf("kind %q is not an event kind (docs/events.md lists them)", clip(p))
		}
		f.exact = append(f.exact, p)
	}
	return f, nil
}

// clip shortens outside input quoted in a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
