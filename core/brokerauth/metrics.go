package brokerauth

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the edgeplat_broker_auth_* series. Labels are the check, the
// result and a reason from the fixed Reason* set; never a username, client
// id, tenant or topic.
type metrics struct {
	decisions *prometheus.CounterVec
	cacheHit  prometheus.Counter
	cacheMiss prometheus.Counter
}

// Allow reasons, beside the Reason* deny reasons.
const (
	reasonDevice      = "device"
	reasonServiceUser = "service_user"
	reasonNotSuper    = "not_superuser"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	lookups := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edgeplat_broker_auth_cache_lookups_total",
		Help: "Device credential checks answered from the cache (hit) or by the store (miss).",
	}, []string{"result"})
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_broker_auth_decisions_total",
			Help: "Broker authentication and ACL decisions by check (connect, superuser, publish, subscribe, read), result (allow, deny) and reason.",
		}, []string{"check", "result", "reason"}),
		cacheHit:  lookups.WithLabelValues("hit"),
		cacheMiss: lookups.WithLabelValues("miss"),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.decisions, lookups}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("register broker auth metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) allow(check Check, id Identity) {
	reason := reasonDevice
	if id.Superuser {
		reason = reasonServiceUser
	}
	m.decisions.WithLabelValues(string(check), "allow", reason).Inc()
}

func (m *metrics) deny(check Check, reason string) {
	m.decisions.WithLabelValues(string(check), "deny", reason).Inc()
}

func (m *metrics) superuser(ok bool) {
	if ok {
		m.decisions.WithLabelValues(string(CheckSuperuser), "allow", reasonServiceUser).Inc()
		return
	}
	m.decisions.WithLabelValues(string(CheckSuperuser), "deny", reasonNotSuper).Inc()
}
