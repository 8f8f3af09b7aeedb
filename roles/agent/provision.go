package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/publish"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/payload"
	"github.com/edgeplat/edgeplat/roles/agent/reconcile"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// Keys of the agent_meta table that hold the cloud side of the identity.
const (
	metaDeviceName  = "device_name"        // the device's name, shown by the API and registered with the cloud
	metaCredentials = "cloud.credentials"  // cloud.Credentials as JSON
	metaProvisioned = "cloud.provisioned"  // "true" once all three phases passed
	metaTargetState = "cloud.target_state" // the last target state, so a restart without the cloud keeps working
	metaTargetETag  = "cloud.target_etag"  // its ETag, for If-None-Match
)

// provisionPhaseError names the phase of the three-phase registration that
// failed, so the operator knows what to fix and that a retry resumes there.
type provisionPhaseError struct {
	Phase string
	Err   error
}

func (e *provisionPhaseError) Error() string { return e.Phase + ": " + e.Err.Error() }
func (e *provisionPhaseError) Unwrap() error { return e.Err }

func credentials(ctx context.Context, st *store.Store) (*cloud.Credentials, error) {
	raw, err := st.Meta(ctx, metaCredentials)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cr cloud.Credentials
	if err := json.Unmarshal([]byte(raw), &cr); err != nil {
		return nil, fmt.Errorf("stored cloud credentials: %w", err)
	}
	return &cr, nil
}

func provisioned(ctx context.Context, st *store.Store) bool {
	v, err := st.Meta(ctx, metaProvisioned)
	return err == nil && v == "true"
}

// cloudService is httpapi.Cloud and the target-state sync.
type cloudService struct {
	st        *storeRef
	id        *atomic.Pointer[identity]
	pub       *publish.Router
	endpoints *endpointService
	lc        *Agent
	settings  *settingsService
	m         *syncMetrics
	log       *slog.Logger
	// target applies the pulled target state.
	target *reconcile.Reconciler
	// beforeReset runs before a factory reset deletes the store's rows.
	beforeReset func()
	// mu serialises provisioning calls.
	mu     sync.Mutex
	online atomic.Bool // the cloud answered the last pull
	// kick (capacity 1) asks the sync loop for a pull now.
	kick chan struct{}
}

// Provision implements httpapi.Cloud: it runs the three phases: register
// with the provisioning key, fetch the initial target state, report the
// initial state over MQTT. The credentials are stored as soon as
// registration succeeds, so a failure in a later phase is resumed by the
// next call without a new key.
func (s *cloudService) Provision(ctx context.Context, in httpapi.ProvisionRequest) (any, error) {
	st, err := s.st.Open()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cr, err := credentials(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("read cloud credentials: %w", err)
	}
	if cr != nil && provisioned(ctx, st) {
		return nil, httpapi.Errorf(http.StatusConflict, "the agent is provisioned already; POST /v1/deprovision first")
	}
	resume := cr != nil && (in.APIEndpoint == "" || sameEndpoint(in.APIEndpoint, cr.APIEndpoint))
	if !resume {
		var errs []error
		if strings.TrimSpace(in.Key) == "" {
			errs = append(errs, adapters.Fieldf("provisioningApiKey", "is required"))
		}
		if in.APIEndpoint == "" {
			errs = append(errs, adapters.Fieldf("apiEndpoint", "is required: the Cloud API's URL, e.g. https://cloud.example.com"))
		}
		if len(errs) > 0 {
			return nil, httpapi.Invalid(errors.Join(errs...))
		}
	}
	id := s.id.Load()
	if id == nil {
		return nil, httpapi.ErrNotReady
	}
	name := strings.TrimSpace(in.DeviceName)
	if name == "" {
		name = id.Name
	}
	endpoint := in.APIEndpoint
	if resume {
		endpoint = cr.APIEndpoint
	}
	client, err := cloud.NewClient(endpoint)
	if err != nil {
		return nil, httpapi.Errorf(http.StatusBadRequest, "apiEndpoint: %v", err)
	}
	if !resume {
		reg, err := client.Register(ctx, cloud.Registration{Key: strings.TrimSpace(in.Key), AgentUUID: id.UUID, Name: name, Version: version()})
		if err != nil {
			return nil, s.provisionFailed(&provisionPhaseError{Phase: "register", Err: err})
		}
		reg.APIEndpoint = endpoint
		doc, _ := json.Marshal(reg)
		if err := st.SetMeta(ctx, metaCredentials, string(doc)); err != nil {
			return nil, fmt.Errorf("store cloud credentials: %w", err)
		}
		cr = &reg
		s.log.Info("registered with the cloud", "agent", reg.AgentUUID, "tenant", reg.TenantID)
		// The cloud knows the device under this name now; the device
		// must show the same one.
		if name != id.Name {
			if err := st.SetMeta(ctx, metaDeviceName, name); err != nil {
				return nil, fmt.Errorf("store device name: %w", err)
			}
			s.id.Store(&identity{UUID: id.UUID, Name: name})
		}
	}
	ts, etag, _, err := client.TargetState(ctx, *cr, "")
	if err != nil {
		return nil, s.provisionFailed(&provisionPhaseError{Phase: "target-state", Err: err})
	}
	if err := st.SetMeta(ctx, metaTargetState, string(must(json.Marshal(ts)))); err != nil {
		return nil, fmt.Errorf("store target state: %w", err)
	}
	if err := st.SetMeta(ctx, metaTargetETag, etag); err != nil {
		return nil, fmt.Errorf("store target state: %w", err)
	}
	// The cloud sees the agent's health with its state, so a store found
	// corrupt or a full disk is not known to the device alone.
	report := map[string]any{"uuid": cr.AgentUUID, "name": name, "deviceType": in.DeviceType, "version": version(),
		"state": "provisioned", "targetVersion": ts.Version, "health": healthReport(s.lc.Health(ctx))}
	if in.ApplicationID != nil {
		report["applicationId"] = *in.ApplicationID
	}
	if err := cloud.ReportState(ctx, *cr, report); err != nil {
		return nil, s.provisionFailed(&provisionPhaseError{Phase: "report-state", Err: err})
	}
	if err := st.SetMeta(ctx, metaProvisioned, "true"); err != nil {
		return nil, fmt.Errorf("store provisioning: %w", err)
	}
	s.online.Store(true)
	s.log.Info("provisioned", "agent", cr.AgentUUID, "target_version", ts.Version)
	if err := s.ensurePlatformDestination(ctx, st); err != nil {
		s.log.Error("default platform destination not created; add one with POST /v1/publish/destinations", "err", err)
	}
	creds, kid := platformCredentials(cr, true)
	if err := s.pub.SetCredentials(ctx, creds, kid); err != nil {
		s.log.Error("publishing not restarted with the new credentials", "err", err)
	}
	return map[string]any{"uuid": cr.AgentUUID, "deviceName": name, "provisioned": true, "mqttBrokerUrl": cr.MQTT.BrokerURL}, nil
}

// provisionFailed answers a failed phase: a refused key is the caller's
// 400, a cloud that cannot be reached or answers oddly a 502.
func (s *cloudService) provisionFailed(err *provisionPhaseError) error {
	s.log.Warn("provisioning failed", "phase", err.Phase, "err", err.Err)
	var ce *cloud.Error
	status := http.StatusBadGateway
	if errors.As(err, &ce) && ce.Status >= 400 && ce.Status < 500 && err.Phase == "register" {
		status = http.StatusBadRequest
	}
	return &httpapi.Error{Status: status, Message: err.Error(), Extra: map[string]any{"phase": err.Phase,
		"hint": "fix the cause and POST /v1/provision again; a registration that succeeded is resumed without a new key"}}
}

// ProvisionStatus implements httpapi.Cloud.
func (s *cloudService) ProvisionStatus(ctx context.Context) (any, error) {
	st, err := s.st.Open()
	if err != nil {
		return nil, err
	}
	cr, err := credentials(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("read cloud credentials: %w", err)
	}
	id := s.id.Load()
	if id == nil {
		return nil, httpapi.ErrNotReady
	}
	out := map[string]any{"provisioned": false, "uuid": id.UUID, "deviceName": id.Name, "apiEndpoint": "",
		"hasProvisioningKey": false, "mqttConfigured": false, "mqttBrokerUrl": "", "targetVersion": int64(0)}
	if cr != nil {
		out["provisioned"] = provisioned(ctx, st)
		out["apiEndpoint"], out["mqttConfigured"], out["mqttBrokerUrl"] = cr.APIEndpoint, cr.MQTT.BrokerURL != "", cr.MQTT.BrokerURL
	}
	// The version of the target state the agent holds, so an operator can
	// see a change reach it without pulling (which would fetch it).
	if raw, err := st.Meta(ctx, metaTargetState); err == nil && raw != "" {
		var cached cloud.TargetState
		if json.Unmarshal([]byte(raw), &cached) == nil {
			out["targetVersion"] = cached.Version
		}
	}
	return out, nil
}

func sameEndpoint(a, b string) bool {
	norm := func(s string) string {
		return strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "/"), "/api/v1")
	}
	return norm(a) == norm(b)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return v
}

// Deprovision implements httpapi.Cloud: the agent is standalone again but
// keeps its UUID and device API key, so POST /v1/provision re-provisions
// it without a new provisioning key.
func (s *cloudService) Deprovision(ctx context.Context) (string, error) {
	st, err := s.st.Open()
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	was := provisioned(ctx, st)
	if err := st.SetMeta(ctx, metaProvisioned, "false"); err != nil {
		return "", fmt.Errorf("deprovision: %w", err)
	}
	s.online.Store(false)
	// A standalone agent has no cloud to run it again: the run state is
	// the cloud's only while it is provisioned.
	if err := s.endpoints.setStopped(ctx, false); err != nil {
		s.log.Error("endpoints not started again after deprovisioning", "err", err)
	}
	if err := s.pub.SetCredentials(ctx, dest.PlatformCredentials{}, ""); err != nil {
		s.log.Error("publishing not restarted without credentials", "err", err)
	}
	s.log.Info("deprovisioned", "was_provisioned", was)
	if !was {
		return "the agent was not provisioned; nothing changed", nil
	}
	return "deprovisioned; the UUID and the device API key are kept, POST /v1/provision provisions again", nil
}

// FactoryReset implements httpapi.Cloud: it deletes everything but the
// UUID, then soft-reboots so every subsystem starts from defaults. It is
// irreversible.
func (s *cloudService) FactoryReset(ctx context.Context) error {
	st, err := s.st.Open()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Nothing may poll or publish from what is about to be deleted.
	if s.beforeReset != nil {
		s.beforeReset()
	}
	if err := s.endpoints.forget(func() error { return st.FactoryReset(ctx) }); err != nil {
		return fmt.Errorf("factory reset: %w", err)
	}
	s.log.Warn("factory reset: endpoints, settings, users, credentials and publishing configuration deleted")
	if _, ok := s.lc.Reboot(); !ok {
		s.log.Warn("factory reset: the agent is not RUNNING; it starts from defaults at its next start")
	}
	return nil
}

// ensurePlatformDestination gives a freshly provisioned agent somewhere to
// publish: when no platform destination exists (enabled or not), it adds
// one named "cloud" with a subscription for every endpoint in the custom
// format, so readings reach the cloud without further setup. An operator's
// own platform destination is left alone.
func (s *cloudService) ensurePlatformDestination(ctx context.Context, st *store.Store) error {
	ds, err := st.Publishing().Destinations(ctx, true)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if d.Type == "platform" {
			return nil
		}
	}
	var d store.Destination
	for _, name := range []string{"cloud", "cloud-platform"} {
		d, err = st.Publishing().CreateDestination(ctx, store.Destination{Name: name, Type: "platform", Enabled: true})
		if !errors.Is(err, store.ErrDuplicate) {
			break
		}
	}
	if err != nil {
		return err
	}
	if _, err := st.Publishing().CreateSubscription(ctx, store.Subscription{DestinationID: d.ID, PayloadFormat: string(payload.Custom),
		Compression: "json", Enabled: true}); err != nil {
		return err
	}
	s.log.Info("platform destination added", "destination", d.Name, "id", d.ID)
	return nil
}

// platformCredentials are what the platform destination connects with: the
// provisioned device's broker credentials, or none when the agent is
// standalone. A standalone agent has no tenant and agent ids to name a
// platform topic with, so the platform destination publishes nothing then,
// and queues nothing; what it had queued waits for the next provisioning.
func platformCredentials(cr *cloud.Credentials, provisioned bool) (dest.PlatformCredentials, string) {
	if cr == nil {
		return dest.PlatformCredentials{}, ""
	}
	kid := publish.KidOf(cr.APIKey)
	if !provisioned {
		return dest.PlatformCredentials{}, kid
	}
	return dest.PlatformCredentials{
		BrokerURL: cr.MQTT.BrokerURL, Username: cr.MQTT.Username, Password: cr.MQTT.Password,
		ClientID: cr.MQTT.ClientID, TopicPrefix: cr.MQTT.TopicPrefix,
	}, kid
}
