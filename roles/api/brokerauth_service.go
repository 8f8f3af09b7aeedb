package api

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/brokerusers"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// BrokerAuth is the broker's authorizer over the agent registry, with the
// service that writes its refusals to the audit log. serve-api builds one
// for its /broker-auth callbacks; all-in-one builds one with NewBrokerAuth
// and gives it to both the embedded broker and the API, so a revoked key
// is forgotten by the one authorizer both use.
type BrokerAuth struct {
	Authorizer *brokerauth.Authorizer
	store      *accounts.Store
	log        *slog.Logger
	queue      chan brokerauth.DenyEvent
	dropped    prometheus.Counter
}

// denyQueue bounds the refusals waiting for the audit log. The broker's
// connect and publish paths hand events over without waiting; a flood past
// this is counted and dropped rather than slowing the broker.
const denyQueue = 1024

// NewBrokerAuth builds the authorizer for cfg: devices are checked against
// the registry in database d, and cfg.MQTT's username and password (the
// API's own MQTT client) are the service user. It does no I/O.
func NewBrokerAuth(cfg *config.Config, r *rt.Runtime, d *db.DB) (*BrokerAuth, error) {
	b := &BrokerAuth{
		store: accounts.NewStore(d),
		log:   r.Component("broker-auth"),
		queue: make(chan brokerauth.DenyEvent, denyQueue),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_broker_auth_audit_dropped_total",
			Help: "Broker refusals not written to the audit log because its queue was full."}),
	}
	if r.Metrics != nil {
		if err := r.Metrics.Register(b.dropped); err != nil {
			return nil, fmt.Errorf("broker auth metrics: %w", err)
		}
	}
	opts := brokerauth.OptionsFromConfig(cfg.MQTT)
	// Devices by their keys, the tenants' broker users by name.
	opts.Store = brokerusers.CombinedStore(registry.NewStore(d), brokerusers.NewStore(d, reservedBrokerNames(cfg)...))
	opts.Logger = b.log
	opts.Registerer = r.Metrics
	opts.OnDeny = b.enqueue
	a, err := brokerauth.New(opts)
	if err != nil {
		return nil, fmt.Errorf("broker auth (mqtt.username, mqtt.password, mqtt.auth_cache_ttl_seconds): %w", err)
	}
	b.Authorizer = a
	return b, nil
}

// reservedBrokerNames are names no broker user may take: the API's own
// MQTT account and client id.
func reservedBrokerNames(cfg *config.Config) []string {
	var names []string
	for _, n := range []string{cfg.MQTT.Username, cfg.MQTT.ClientID} {
		if n != "" {
			names = append(names, n)
		}
	}
	return names
}

// Revoked drops cached answers for device keys that stopped working.
func (b *BrokerAuth) Revoked(kids []string) {
	for _, kid := range kids {
		b.Authorizer.InvalidatePrefix(registry.DeviceKeyPrefix(kid))
	}
}

func (b *BrokerAuth) enqueue(_ context.Context, e brokerauth.DenyEvent) {
	select {
	case b.queue <- e:
	default:
		b.dropped.Inc()
	}
}

// Name implements lifecycle.Service.
func (b *BrokerAuth) Name() string { return "broker-auth-audit" }

// Start implements lifecycle.Service.
func (b *BrokerAuth) Start(context.Context) error { return nil }

// Run writes refusals to the audit log until ctx ends.
func (b *BrokerAuth) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-b.queue:
			b.record(ctx, e)
		}
	}
}

// Stop implements lifecycle.Service: what is still queued is written.
func (b *BrokerAuth) Stop(ctx context.Context) error {
	for {
		select {
		case e := <-b.queue:
			b.record(ctx, e)
		default:
			return nil
		}
	}
}

func (b *BrokerAuth) record(ctx context.Context, e brokerauth.DenyEvent) {
	err := b.store.Record(ctx, accounts.Event{
		Tenant: e.TenantUUID, Kind: AuditBrokerDenied, Actor: e.UserFingerprint, ActorKind: "mqtt", Target: e.Topic,
		Outcome: "failure", Detail: map[string]any{"check": string(e.Check), "reason": e.Reason, "clientId": e.ClientID, "agentUuid": e.AgentUUID},
	})
	if err != nil {
		b.log.Error("broker refusal not audited", "reason", e.Reason, "err", err)
	}
}

// AuditBrokerDenied is the audit kind of a broker refusal.
const AuditBrokerDenied = "broker.denied"
