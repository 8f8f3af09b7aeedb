package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/publish"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/payload"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// Keys of the agent_meta table that hold the cloud side of the identity.
const (
	metaCredentials = "cloud.credentials"  // cloud.Credentials as JSON
	metaProvisioned = "cloud.provisioned"  // "true" once all three phases passed
	metaTargetState = "cloud.target_state" // the last target state, so a restart without the cloud keeps working
	metaTargetETag  = "cloud.target_etag"  // its ETag, for If-None-Match
)

type provisionRequest struct {
	Key           string `json:"provisioningApiKey"`
	DeviceName    string `json:"deviceName"`
	DeviceType    string `json:"deviceType"`
	APIEndpoint   string `json:"apiEndpoint"`
	ApplicationID *int64 `json:"applicationId"`
}

// provisionPhaseError names the phase of the three-phase registration that
// failed, so the operator knows what to fix and that a retry resumes there.
type provisionPhaseError struct {
	Phase string
	Err   error
}

func (e *provisionPhaseError) Error() string { return e.Phase + ": " + e.Err.Error() }
func (e *provisionPhaseError) Unwrap() error { return e.Err }

func (a *Agent) credentials(ctx context.Context, st *store.Store) (*cloud.Credentials, error) {
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

func (a *Agent) provisioned(ctx context.Context, st *store.Store) bool {
	v, err := st.Meta(ctx, metaProvisioned)
	return err == nil && v == "true"
}

// provision runs the three phases: register with the provisioning key,
// fetch the initial target state, report the initial state over MQTT. The
// credentials are stored as soon as registration succeeds, so a failure
// in a later phase is resumed by the next call without a new key.
func (a *Agent) provision(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	var in provisionRequest
	if !bind(c, &in) {
		return
	}
	ctx := c.Request.Context()
	a.provisionMu.Lock()
	defer a.provisionMu.Unlock()
	cr, err := a.credentials(ctx, st)
	if err != nil {
		a.internal(c, "read cloud credentials", err)
		return
	}
	if cr != nil && a.provisioned(ctx, st) {
		fail(c, http.StatusConflict, "the agent is provisioned already; POST /v1/deprovision first")
		return
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
			badRequest(c, errors.Join(errs...))
			return
		}
	}
	id := a.identity.Load()
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
		fail(c, http.StatusBadRequest, "apiEndpoint: %v", err)
		return
	}
	if !resume {
		reg, err := client.Register(ctx, cloud.Registration{Key: strings.TrimSpace(in.Key), AgentUUID: id.UUID, Name: name, Version: a.version()})
		if err != nil {
			a.provisionFailed(c, &provisionPhaseError{Phase: "register", Err: err})
			return
		}
		reg.APIEndpoint = endpoint
		doc, _ := json.Marshal(reg)
		if err := st.SetMeta(ctx, metaCredentials, string(doc)); err != nil {
			a.internal(c, "store cloud credentials", err)
			return
		}
		cr = &reg
		a.log.Info("registered with the cloud", "agent", reg.AgentUUID, "tenant", reg.TenantID)
		// The cloud knows the device under this name now; the device
		// must show the same one.
		if name != id.Name {
			if err := st.SetMeta(ctx, "device_name", name); err != nil {
				a.internal(c, "store device name", err)
				return
			}
			a.identity.Store(&identity{UUID: id.UUID, Name: name})
		}
	}
	ts, etag, _, err := client.TargetState(ctx, *cr, "")
	if err != nil {
		a.provisionFailed(c, &provisionPhaseError{Phase: "target-state", Err: err})
		return
	}
	if err := st.SetMeta(ctx, metaTargetState, string(must(json.Marshal(ts)))); err != nil {
		a.internal(c, "store target state", err)
		return
	}
	if err := st.SetMeta(ctx, metaTargetETag, etag); err != nil {
		a.internal(c, "store target state", err)
		return
	}
	// The cloud sees the agent's health with its state, so a store found
	// corrupt or a full disk is not known to the device alone.
	_, _, subs, unhealthy, critical := a.check(ctx)
	report := map[string]any{"uuid": cr.AgentUUID, "name": name, "deviceType": in.DeviceType, "version": a.version(),
		"state": "provisioned", "targetVersion": ts.Version,
		"health": map[string]any{"overall": len(unhealthy) == 0 && len(critical) == 0, "subsystems": subs,
			"unhealthySubsystems": unhealthy, "criticalFailures": critical}}
	if in.ApplicationID != nil {
		report["applicationId"] = *in.ApplicationID
	}
	if err := cloud.ReportState(ctx, *cr, report); err != nil {
		a.provisionFailed(c, &provisionPhaseError{Phase: "report-state", Err: err})
		return
	}
	if err := st.SetMeta(ctx, metaProvisioned, "true"); err != nil {
		a.internal(c, "store provisioning", err)
		return
	}
	a.cloud.online.Store(true)
	a.log.Info("provisioned", "agent", cr.AgentUUID, "target_version", ts.Version)
	if err := a.ensurePlatformDestination(ctx, st); err != nil {
		a.log.Error("default platform destination not created; add one with POST /v1/publish/destinations", "err", err)
	}
	creds, kid := platformCredentials(cr, true)
	if err := a.pub.SetCredentials(ctx, creds, kid); err != nil {
		a.log.Error("publishing not restarted with the new credentials", "err", err)
	}
	c.JSON(http.StatusOK, gin.H{"success": true, "device": gin.H{"uuid": cr.AgentUUID, "deviceName": name,
		"provisioned": true, "mqttBrokerUrl": cr.MQTT.BrokerURL}})
}

// provisionFailed answers a failed phase: a refused key is the caller's
// 400, a cloud that cannot be reached or answers oddly a 502.
func (a *Agent) provisionFailed(c *gin.Context, err *provisionPhaseError) {
	a.log.Warn("provisioning failed", "phase", err.Phase, "err", err.Err)
	var ce *cloud.Error
	status := http.StatusBadGateway
	if errors.As(err, &ce) && ce.Status >= 400 && ce.Status < 500 && err.Phase == "register" {
		status = http.StatusBadRequest
	}
	c.AbortWithStatusJSON(status, gin.H{"error": err.Error(), "phase": err.Phase,
		"hint": "fix the cause and POST /v1/provision again; a registration that succeeded is resumed without a new key"})
}

func (a *Agent) provisionStatus(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	cr, err := a.credentials(ctx, st)
	if err != nil {
		a.internal(c, "read cloud credentials", err)
		return
	}
	id := a.identity.Load()
	out := gin.H{"provisioned": false, "uuid": id.UUID, "deviceName": id.Name, "apiEndpoint": "",
		"hasProvisioningKey": false, "mqttConfigured": false, "mqttBrokerUrl": ""}
	if cr != nil {
		out["provisioned"] = a.provisioned(ctx, st)
		out["apiEndpoint"], out["mqttConfigured"], out["mqttBrokerUrl"] = cr.APIEndpoint, cr.MQTT.BrokerURL != "", cr.MQTT.BrokerURL
	}
	c.JSON(http.StatusOK, out)
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

// deprovision leaves the cloud: the agent is standalone again but keeps
// its UUID and device API key, so POST /v1/provision re-provisions it
// without a new provisioning key.
func (a *Agent) deprovision(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	a.provisionMu.Lock()
	defer a.provisionMu.Unlock()
	ctx := c.Request.Context()
	was := a.provisioned(ctx, st)
	if err := st.SetMeta(ctx, metaProvisioned, "false"); err != nil {
		a.internal(c, "deprovision", err)
		return
	}
	a.cloud.online.Store(false)
	if err := a.pub.SetCredentials(ctx, dest.PlatformCredentials{}, ""); err != nil {
		a.log.Error("publishing not restarted without credentials", "err", err)
	}
	msg := "deprovisioned; the UUID and the device API key are kept, POST /v1/provision provisions again"
	if !was {
		msg = "the agent was not provisioned; nothing changed"
	}
	a.log.Info("deprovisioned", "was_provisioned", was)
	c.JSON(http.StatusOK, gin.H{"message": msg, "status": "deprovisioned"})
}

// factoryReset deletes everything but the UUID, then soft-reboots so every
// subsystem starts from defaults. It is irreversible.
func (a *Agent) factoryReset(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	a.provisionMu.Lock()
	defer a.provisionMu.Unlock()
	a.endpointsMu.Lock()
	defer a.endpointsMu.Unlock()
	// Nothing may poll or publish from what is about to be deleted.
	a.runner.StopAll()
	if err := st.FactoryReset(c.Request.Context()); err != nil {
		a.internal(c, "factory reset", err)
		return
	}
	a.log.Warn("factory reset: endpoints, settings, users, credentials and publishing configuration deleted")
	if _, ok := a.requestReboot(); !ok {
		a.log.Warn("factory reset: the agent is not RUNNING; it starts from defaults at its next start")
	}
	c.JSON(http.StatusOK, gin.H{"message": "all data deleted except the agent UUID; the agent restarts its services", "status": "factory-reset"})
}

// ensurePlatformDestination gives a freshly provisioned agent somewhere to
// publish: when no platform destination exists (enabled or not), it adds
// one named "cloud" with a subscription for every endpoint in the custom
// format, so readings reach the cloud without further setup. An operator's
// own platform destination is left alone.
func (a *Agent) ensurePlatformDestination(ctx context.Context, st *store.Store) error {
	ds, err := st.Destinations(ctx, true)
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
		d, err = st.CreateDestination(ctx, store.Destination{Name: name, Type: "platform", Enabled: true})
		if !errors.Is(err, store.ErrDuplicate) {
			break
		}
	}
	if err != nil {
		return err
	}
	if _, err := st.CreateSubscription(ctx, store.Subscription{DestinationID: d.ID, PayloadFormat: string(payload.Custom),
		Compression: "json", Enabled: true}); err != nil {
		return err
	}
	a.log.Info("platform destination added", "destination", d.Name, "id", d.ID)
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
