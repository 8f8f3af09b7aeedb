package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// Publishing is the publishing configuration: destinations, the
// subscriptions routing endpoints to them, and the state of each. A
// change applies to the running destinations at once.
type Publishing interface {
	// Destinations lists the destinations, secrets masked.
	Destinations(ctx context.Context, includeDisabled bool) (any, error)
	CreateDestination(ctx context.Context, in DestinationInput) (any, error)
	UpdateDestination(ctx context.Context, id int64, in DestinationInput) (any, error)
	DeleteDestination(ctx context.Context, id int64) error
	// TestDestination tries a destination's connection without saving
	// it; err says why it failed.
	TestDestination(ctx context.Context, in DestinationTest) (message string, err error)
	// Subscriptions lists the subscriptions (of one destination unless
	// 0).
	Subscriptions(ctx context.Context, destination int64, includeDisabled bool) (any, error)
	CreateSubscription(ctx context.Context, in SubscriptionInput) (any, error)
	UpdateSubscription(ctx context.Context, id int64, in SubscriptionInput) (any, error)
	DeleteSubscription(ctx context.Context, id int64) error
	ProtocolOutputs(ctx context.Context) (any, error)
	// BufferStatus is GET /v1/buffer/status.
	BufferStatus(ctx context.Context) (any, error)
}

// DestinationInput is the body of POST and PATCH
// /v1/publish/destinations; PATCH changes the fields that are set.
type DestinationInput struct {
	Name    *string         `json:"name"`
	Type    *string         `json:"type"`
	Config  json.RawMessage `json:"config_json"`
	Enabled *bool           `json:"enabled"`
}

// DestinationTest is the body of POST /v1/publish/destinations/test.
type DestinationTest struct {
	Type   string          `json:"type"`
	Config json.RawMessage `json:"config_json"`
}

// SubscriptionInput is the body of POST and PATCH
// /v1/publish/subscriptions; PATCH changes the fields that are set.
type SubscriptionInput struct {
	DestinationID *int64          `json:"publish_destination_id"`
	Topics        []string        `json:"topics"`
	PayloadFormat *string         `json:"payload_format"`
	Compression   *string         `json:"compression"`
	Enabled       *bool           `json:"enabled"`
	Route         json.RawMessage `json:"route_json"`
}

// publishRoutes are the handlers of one resource group.
type publishRoutes struct{ routes }

// RegisterPublish adds the publishing routes and the buffer status.
func RegisterPublish(g *gin.RouterGroup, d Deps) {
	r := publishRoutes{routes{Deps: d}}
	g.GET("/publish/destinations", r.listDestinations)
	g.POST("/publish/destinations", r.createDestination)
	g.POST("/publish/destinations/test", r.testDestination)
	g.PATCH("/publish/destinations/:id", r.patchDestination)
	g.DELETE("/publish/destinations/:id", r.deleteDestination)
	g.GET("/publish/subscriptions", r.listSubscriptions)
	g.POST("/publish/subscriptions", r.createSubscription)
	g.PATCH("/publish/subscriptions/:id", r.patchSubscription)
	g.DELETE("/publish/subscriptions/:id", r.deleteSubscription)
	g.GET("/protocol-outputs", r.listProtocolOutputs)
	g.GET("/buffer/status", r.bufferStatus)
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

func (r publishRoutes) listDestinations(c *gin.Context) {
	all, ok := boolQuery(c, "includeDisabled", true)
	if !ok {
		return
	}
	ds, err := r.Publishing.Destinations(c.Request.Context(), all)
	r.reply(c, http.StatusOK, "list destinations", gin.H{"publishers": ds}, err)
}

func (r publishRoutes) createDestination(c *gin.Context) {
	var in DestinationInput
	if !bind(c, &in) {
		return
	}
	d, err := r.Publishing.CreateDestination(c.Request.Context(), in)
	r.reply(c, http.StatusCreated, "create destination", d, err)
}

func (r publishRoutes) patchDestination(c *gin.Context) {
	id, ok := idParam(c)
	if !ok {
		return
	}
	var in DestinationInput
	if !bind(c, &in) {
		return
	}
	d, err := r.Publishing.UpdateDestination(c.Request.Context(), id, in)
	r.reply(c, http.StatusOK, "update destination", d, err)
}

func (r publishRoutes) deleteDestination(c *gin.Context) {
	id, ok := idParam(c)
	if !ok {
		return
	}
	err := r.Publishing.DeleteDestination(c.Request.Context(), id)
	r.reply(c, http.StatusOK, "delete destination", gin.H{"deleted": true}, err)
}

// testDestination always answers 200; ok carries the result.
func (r publishRoutes) testDestination(c *gin.Context) {
	var in DestinationTest
	if !bind(c, &in) {
		return
	}
	msg, err := r.Publishing.TestDestination(c.Request.Context(), in)
	if err != nil {
		c.JSON(http.StatusOK, gin.H{"ok": false, "error": strings.ReplaceAll(err.Error(), "\n", "; ")})
		return
	}
	c.JSON(http.StatusOK, gin.H{"ok": true, "message": msg})
}

func (r publishRoutes) listSubscriptions(c *gin.Context) {
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
	subs, err := r.Publishing.Subscriptions(c.Request.Context(), dest, all)
	r.reply(c, http.StatusOK, "list subscriptions", gin.H{"subscriptions": subs}, err)
}

func (r publishRoutes) createSubscription(c *gin.Context) {
	var in SubscriptionInput
	if !bind(c, &in) {
		return
	}
	if in.DestinationID == nil {
		fail(c, http.StatusBadRequest, "publish_destination_id: is required")
		return
	}
	s, err := r.Publishing.CreateSubscription(c.Request.Context(), in)
	r.reply(c, http.StatusCreated, "create subscription", s, err)
}

func (r publishRoutes) patchSubscription(c *gin.Context) {
	id, ok := idParam(c)
	if !ok {
		return
	}
	var in SubscriptionInput
	if !bind(c, &in) {
		return
	}
	s, err := r.Publishing.UpdateSubscription(c.Request.Context(), id, in)
	r.reply(c, http.StatusOK, "update subscription", s, err)
}

func (r publishRoutes) deleteSubscription(c *gin.Context) {
	id, ok := idParam(c)
	if !ok {
		return
	}
	err := r.Publishing.DeleteSubscription(c.Request.Context(), id)
	r.reply(c, http.StatusOK, "delete subscription", gin.H{"deleted": true}, err)
}

func (r publishRoutes) listProtocolOutputs(c *gin.Context) {
	outs, err := r.Publishing.ProtocolOutputs(c.Request.Context())
	r.reply(c, http.StatusOK, "list protocol outputs", gin.H{"outputs": outs}, err)
}

func (r publishRoutes) bufferStatus(c *gin.Context) {
	st, err := r.Publishing.BufferStatus(c.Request.Context())
	r.reply(c, http.StatusOK, "buffer status", st, err)
}
