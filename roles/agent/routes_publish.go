package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/mqtt"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/payload"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// destinationTestTimeout bounds POST /v1/publish/destinations/test.
const destinationTestTimeout = 5 * time.Second

// secretKeys are config_json keys shown masked.
var secretKeys = dest.SecretKeys

type destinationInput struct {
	Name    *string         `json:"name"`
	Type    *string         `json:"type"`
	Config  json.RawMessage `json:"config_json"`
	Enabled *bool           `json:"enabled"`
}

// validateDestination checks a destination's type and its config_json for
// that type. Problems name the field.
func validateDestination(d store.Destination) error {
	var errs []error
	if strings.TrimSpace(d.Name) == "" {
		errs = append(errs, adapters.Fieldf("name", "is required"))
	} else if len(d.Name) > maxNameLen {
		errs = append(errs, adapters.Fieldf("name", "must be at most %d characters", maxNameLen))
	}
	if types := dest.Types(); !slices.Contains(types, d.Type) {
		return errors.Join(append(errs, adapters.Fieldf("type", "must be one of %s, got %q", strings.Join(types, ", "), d.Type))...)
	}
	if err := dest.Validate(d.Type, d.Config); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// singlePlatform refuses a second platform destination: the cloud's broker
// admits one connection per agent (its client id is the agent's), so two
// would take turns dropping each other.
func (a *Agent) singlePlatform(c *gin.Context, st *store.Store, d store.Destination) bool {
	if d.Type != dest.TypePlatform {
		return true
	}
	ds, err := st.Destinations(c.Request.Context(), true)
	if err != nil {
		a.internal(c, "list destinations", err)
		return false
	}
	for _, o := range ds {
		if o.Type == dest.TypePlatform && o.ID != d.ID {
			fail(c, http.StatusBadRequest, "type: destination %q (id %d) is the platform destination already; an agent has one connection to the cloud", o.Name, o.ID)
			return false
		}
	}
	return true
}

// maskSecrets hides credential values of a config_json object.
func maskSecrets(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	for _, k := range secretKeys {
		if _, ok := m[k]; ok {
			m[k], _ = json.Marshal(redactedPassword)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// keepMaskedSecrets lets a client send back a masked config it read.
func keepMaskedSecrets(in, stored json.RawMessage) json.RawMessage {
	var m, old map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil || m == nil {
		return in
	}
	_ = json.Unmarshal(stored, &old)
	for _, k := range secretKeys {
		var v string
		if json.Unmarshal(m[k], &v) == nil && v == redactedPassword {
			if prev, ok := old[k]; ok {
				m[k] = prev
			} else {
				delete(m, k)
			}
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return in
	}
	return out
}

func destinationView(d store.Destination) store.Destination {
	d.Config = maskSecrets(d.Config)
	return d
}

// loadByID reads the row named by :id with get, or answers 400 (a bad id),
// 404, 500 or 503 and reports false.
func loadByID[T any](a *Agent, c *gin.Context, what string, get func(*store.Store, context.Context, int64) (T, error)) (*store.Store, T, bool) {
	var zero T
	st, ok := a.storeFor(c)
	if !ok {
		return nil, zero, false
	}
	id, ok := idParam(c)
	if !ok {
		return nil, zero, false
	}
	v, err := get(st, c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		fail(c, http.StatusNotFound, "no %s %d", what, id)
		return nil, zero, false
	}
	if err != nil {
		a.internal(c, "read "+what, err)
		return nil, zero, false
	}
	return st, v, true
}

// deleteByID deletes the row named by :id with del and answers
// {deleted: true}, or 400, 404, 500 or 503.
func (a *Agent) deleteByID(c *gin.Context, what string, del func(*store.Store, context.Context, int64) error) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	id, ok := idParam(c)
	if !ok {
		return
	}
	err := del(st, c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		fail(c, http.StatusNotFound, "no %s %d", what, id)
		return
	}
	if err != nil {
		a.internal(c, "delete "+what, err)
		return
	}
	// Both kinds of rows feed the publisher: it follows at once.
	a.reloadPublishing(c.Request.Context())
	c.JSON(http.StatusOK, gin.H{"deleted": true})
}

func boolQuery(c *gin.Context, name string, def bool) (bool, bool) {
	v := c.Query(name)
	if v == "" {
		return def, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		fail(c, http.StatusBadRequest, "%s: must be true or false, got %q", name, v)
		return false, false
	}
	return b, true
}

func idParam(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		fail(c, http.StatusBadRequest, "id: must be a positive integer, got %q", c.Param("id"))
		return 0, false
	}
	return id, true
}

func (a *Agent) listDestinations(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	all, ok := boolQuery(c, "includeDisabled", true)
	if !ok {
		return
	}
	ds, err := st.Destinations(c.Request.Context(), all)
	if err != nil {
		a.internal(c, "list destinations", err)
		return
	}
	for i := range ds {
		ds[i] = destinationView(ds[i])
	}
	c.JSON(http.StatusOK, gin.H{"publishers": ds})
}

func (a *Agent) createDestination(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	var in destinationInput
	if !bind(c, &in) {
		return
	}
	d := store.Destination{Enabled: true}
	in.apply(&d)
	if err := validateDestination(d); err != nil {
		badRequest(c, err)
		return
	}
	if !a.singlePlatform(c, st, d) {
		return
	}
	d, err := st.CreateDestination(c.Request.Context(), d)
	if errors.Is(err, store.ErrDuplicate) {
		fail(c, http.StatusBadRequest, "name: a destination named %q exists already", d.Name)
		return
	}
	if err != nil {
		a.internal(c, "create destination", err)
		return
	}
	a.reloadPublishing(c.Request.Context())
	c.JSON(http.StatusCreated, destinationView(d))
}

func (in destinationInput) apply(d *store.Destination) {
	if in.Name != nil {
		d.Name = strings.TrimSpace(*in.Name)
	}
	if in.Type != nil {
		d.Type = *in.Type
	}
	if in.Config != nil {
		d.Config = keepMaskedSecrets(in.Config, d.Config)
	}
	if in.Enabled != nil {
		d.Enabled = *in.Enabled
	}
}

func (a *Agent) patchDestination(c *gin.Context) {
	st, d, ok := loadByID(a, c, "destination", (*store.Store).Destination)
	if !ok {
		return
	}
	var in destinationInput
	if !bind(c, &in) {
		return
	}
	in.apply(&d)
	if err := validateDestination(d); err != nil {
		badRequest(c, err)
		return
	}
	if !a.singlePlatform(c, st, d) {
		return
	}
	if err := st.UpdateDestination(c.Request.Context(), d); err != nil {
		if errors.Is(err, store.ErrDuplicate) {
			fail(c, http.StatusBadRequest, "name: a destination named %q exists already", d.Name)
			return
		}
		a.internal(c, "update destination", err)
		return
	}
	a.reloadPublishing(c.Request.Context())
	c.JSON(http.StatusOK, destinationView(d))
}

func (a *Agent) deleteDestination(c *gin.Context) {
	a.deleteByID(c, "destination", func(st *store.Store, ctx context.Context, id int64) error {
		if err := st.DeleteDestination(ctx, id); err != nil {
			return err
		}
		a.pub.ForgetStopped(ctx, id)
		return nil
	})
}

type destinationTest struct {
	Type   string          `json:"type"`
	Config json.RawMessage `json:"config_json"`
}

// testDestination tries a destination's connection without saving it. It
// always answers 200; ok carries the result.
func (a *Agent) testDestination(c *gin.Context) {
	var in destinationTest
	if !bind(c, &in) {
		return
	}
	report := func(msg string, err error) {
		if err != nil {
			c.JSON(http.StatusOK, gin.H{"ok": false, "error": strings.ReplaceAll(err.Error(), "\n", "; ")})
			return
		}
		c.JSON(http.StatusOK, gin.H{"ok": true, "message": msg})
	}
	if in.Type != "tsdb" && in.Type != "mqtt" {
		report("", fmt.Errorf("type %q cannot be tested; testable types are tsdb and mqtt", in.Type))
		return
	}
	if err := validateDestination(store.Destination{Name: "test", Type: in.Type, Config: in.Config}); err != nil {
		report("", err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), destinationTestTimeout)
	defer cancel()
	report(dest.Probe(ctx, in.Type, in.Config, dest.Env{Logger: a.log}))
}

type subscriptionInput struct {
	DestinationID *int64          `json:"publish_destination_id"`
	Topics        []string        `json:"topics"`
	PayloadFormat *string         `json:"payload_format"`
	Compression   *string         `json:"compression"`
	Enabled       *bool           `json:"enabled"`
	Route         json.RawMessage `json:"route_json"`
}

func (in subscriptionInput) apply(s *store.Subscription) {
	if in.DestinationID != nil {
		s.DestinationID = *in.DestinationID
	}
	if in.Topics != nil {
		s.Topics = in.Topics
	}
	if in.PayloadFormat != nil {
		s.PayloadFormat = *in.PayloadFormat
	}
	if in.Compression != nil {
		s.Compression = *in.Compression
	}
	if in.Enabled != nil {
		s.Enabled = *in.Enabled
	}
	if in.Route != nil {
		s.Route = in.Route
	}
}

// checkSubscription validates a subscription against its destination, or
// answers 400 naming every field at fault (500 when the store fails).
func (a *Agent) checkSubscription(c *gin.Context, st *store.Store, s store.Subscription) bool {
	var errs []error
	d, err := st.Destination(c.Request.Context(), s.DestinationID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		errs = append(errs, adapters.Fieldf("publish_destination_id", "no destination %d", s.DestinationID))
	case err != nil:
		a.internal(c, "read destination", err)
		return false
	}
	for i, t := range s.Topics {
		if err := mqtt.ValidateFilter(t); err != nil {
			errs = append(errs, adapters.Fieldf(fmt.Sprintf("topics[%d]", i), "%v", err))
		}
	}
	if _, err := payload.ParseFormat(s.PayloadFormat); err != nil {
		errs = append(errs, err)
	}
	if _, err := payload.ParseCompression(s.Compression); err != nil {
		errs = append(errs, err)
	}
	var route struct {
		Topic string `json:"topic"`
	}
	if len(s.Route) > 0 && string(s.Route) != "null" {
		if err := json.Unmarshal(s.Route, &route); err != nil {
			errs = append(errs, adapters.Fieldf("route_json", "must be an object: %v", err))
		}
	}
	if err == nil && d.Type != "platform" {
		if route.Topic == "" {
			errs = append(errs, adapters.Fieldf("route_json.topic", "is required for a %s destination", d.Type))
		} else if strings.ContainsAny(route.Topic, "+#") {
			errs = append(errs, adapters.Fieldf("route_json.topic", "must not contain wildcards"))
		}
	}
	if len(errs) > 0 {
		badRequest(c, errors.Join(errs...))
		return false
	}
	return true
}

func (a *Agent) listSubscriptions(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	all, ok := boolQuery(c, "includeDisabled", true)
	if !ok {
		return
	}
	var dest int64
	if v := c.Query("publish_destination_id"); v != "" {
		var err error
		if dest, err = strconv.ParseInt(v, 10, 64); err != nil || dest < 1 {
			fail(c, http.StatusBadRequest, "publish_destination_id: must be a positive integer, got %q", v)
			return
		}
	}
	subs, err := st.Subscriptions(c.Request.Context(), dest, all)
	if err != nil {
		a.internal(c, "list subscriptions", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"subscriptions": subs})
}

func (a *Agent) createSubscription(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	var in subscriptionInput
	if !bind(c, &in) {
		return
	}
	if in.DestinationID == nil {
		fail(c, http.StatusBadRequest, "publish_destination_id: is required")
		return
	}
	s := store.Subscription{Topics: []string{}, PayloadFormat: "custom", Compression: "json", Enabled: true}
	in.apply(&s)
	if !a.checkSubscription(c, st, s) {
		return
	}
	s, err := st.CreateSubscription(c.Request.Context(), s)
	if err != nil {
		a.internal(c, "create subscription", err)
		return
	}
	a.reloadPublishing(c.Request.Context())
	c.JSON(http.StatusCreated, s)
}

func (a *Agent) patchSubscription(c *gin.Context) {
	st, s, ok := loadByID(a, c, "subscription", (*store.Store).Subscription)
	if !ok {
		return
	}
	var in subscriptionInput
	if !bind(c, &in) {
		return
	}
	in.apply(&s)
	if !a.checkSubscription(c, st, s) {
		return
	}
	if err := st.UpdateSubscription(c.Request.Context(), s); err != nil {
		a.internal(c, "update subscription", err)
		return
	}
	a.reloadPublishing(c.Request.Context())
	c.JSON(http.StatusOK, s)
}

func (a *Agent) deleteSubscription(c *gin.Context) {
	a.deleteByID(c, "subscription", (*store.Store).DeleteSubscription)
}

func (a *Agent) listProtocolOutputs(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	outs, err := st.ProtocolOutputs(c.Request.Context())
	if err != nil {
		a.internal(c, "list protocol outputs", err)
		return
	}
	// Drift options are stored but nothing acts on them yet, so they are
	// not shown.
	type output struct {
		Protocol      string `json:"protocol"`
		PayloadFormat string `json:"payload_format"`
	}
	views := make([]output, len(outs))
	for i, o := range outs {
		views[i] = output{Protocol: o.Protocol, PayloadFormat: o.PayloadFormat}
	}
	c.JSON(http.StatusOK, gin.H{"outputs": views})
}
