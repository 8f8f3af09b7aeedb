package registry

import "time"

// Agent statuses (docs/agents-api.md, section Agent status). The status is
// derived from the agent's last contact, never reported by the agent: an
// agent that died cannot say so.
const (
	StatusOnline    = "online"
	StatusOffline   = "offline"
	StatusNeverSeen = "never-seen"
	StatusDisabled  = "disabled"
)

// DefaultOfflineAfter is the silence after which an agent is offline when
// none is configured: three of the agents' default 10 s report intervals,
// so one or two lost reports do not flap the status.
const DefaultOfflineAfter = 30 * time.Second

// StatusOf derives an agent's status at now: disabled when it is not
// active, never-seen without a lastSeen, offline when lastSeen is more than
// offlineAfter ago, online otherwise.
func StatusOf(active bool, lastSeen *time.Time, now time.Time, offlineAfter time.Duration) string {
	switch {
	case !active:
		return StatusDisabled
	case lastSeen == nil || lastSeen.IsZero():
		return StatusNeverSeen
	case now.Sub(*lastSeen) > offlineAfter:
		return StatusOffline
	}
	return StatusOnline
}

// withStatus sets a's Status at now.
func (s *Store) withStatus(a *Agent) {
	a.Status = StatusOf(a.Active, a.LastSeen, s.now(), s.offline())
}

func (s *Store) offline() time.Duration {
	if s.offlineAfter > 0 {
		return s.offlineAfter
	}
	return DefaultOfflineAfter
}

// SetOfflineAfter sets the silence after which an agent is offline
// (api.agent_offline_after); call it before the store is used.
func (s *Store) SetOfflineAfter(d time.Duration) { s.offlineAfter = d }
