package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/httpx"
)

// The devices routes edit the endpoints section of an agent's target
// state (docs/agents-api.md, section Devices). Each edit is a new version
// written by the target-state store path, so the agent hears of it as of
// any other change.

// registerDevices adds the devices routes.
func registerDevices(protected gin.IRoutes, h *handler) {
	protected.GET("/agents/:uuid/devices", h.listDevices)
	protected.POST("/agents/:uuid/devices", h.adminOnly, h.addDevice)
	protected.PUT("/agents/:uuid/devices/:name", h.adminOnly, h.replaceDevice)
	protected.DELETE("/agents/:uuid/devices/:name", h.adminOnly, h.deleteDevice)
}

// errTargetStateUnreadable answers an edit of a stored document this
// build cannot parse (written before documents were checked).
var errTargetStateUnreadable = fmt.Errorf("%w: the agent's target state is not a valid document; replace it with PUT /agents/:uuid/target-state", ErrConflict)

// EditTargetState applies edit to the agent's current document and writes
// the result as the next version. It fails with ErrConflict when another
// write came in between, and with ErrInvalid when the result is not a
// valid document.
func (s *Store) EditTargetState(ctx context.Context, tenant, agent, by string, edit func(*control.TargetStateDoc) error) (TargetState, error) {
	cur, err := s.TargetState(ctx, tenant, agent)
	if err != nil {
		return TargetState{}, err
	}
	// A fleet member's own document is a part (it may name the template's
	// destinations); the write checks what the agent receives whole.
	doc, err := control.ParseTargetStatePart(cur.State)
	if err != nil {
		return TargetState{}, errTargetStateUnreadable
	}
	if err := edit(&doc); err != nil {
		return TargetState{}, err
	}
	doc.SchemaVersion = control.TargetSchemaVersion
	body, err := json.Marshal(doc)
	if err != nil {
		return TargetState{}, fmt.Errorf("encode target state: %w", err)
	}
	if _, err := control.ParseTargetStatePart(body); err != nil {
		return TargetState{}, fmt.Errorf("%w: %s", ErrInvalid, statePaths(err))
	}
	ts, err := s.writeTargetStateIf(ctx, tenant, agent, body, by, cur.Version == 0, cur.Version)
	if errors.Is(err, ErrTargetStateExists) {
		// The first write raced another: the edit did not see it.
		return TargetState{}, errConcurrentTargetState
	}
	return ts, err
}

// deviceList is the answer of GET /agents/:uuid/devices.
type deviceList struct {
	Devices []control.TargetEndpoint `json:"devices"`
	// Managed says the target state manages the agent's endpoints: the
	// list is the whole set, and the agent refuses local changes to them.
	Managed bool  `json:"managed"`
	Version int64 `json:"version"`
}

func (h *handler) listDevices(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	ts, err := h.Store.TargetState(c.Request.Context(), who.TenantUUID, c.Param("uuid"))
	if err != nil {
		h.fail(c, err)
		return
	}
	doc, err := control.ParseTargetStatePart(ts.State)
	if err != nil {
		h.fail(c, errTargetStateUnreadable)
		return
	}
	out := deviceList{Devices: doc.Endpoints, Managed: doc.Endpoints != nil, Version: ts.Version}
	if out.Devices == nil {
		out.Devices = []control.TargetEndpoint{}
	}
	c.JSON(http.StatusOK, out)
}

// bindDevice reads one device body and checks it as an entry of a
// document would be, naming fields relative to the device.
func (h *handler) bindDevice(c *gin.Context) (control.TargetEndpoint, bool) {
	var raw json.RawMessage
	if !httpx.BindStrict(c, maxBody, &raw, h.WriteError) {
		return control.TargetEndpoint{}, false
	}
	doc, err := control.ParseTargetState(fmt.Appendf(nil, `{"schemaVersion":%d,"endpoints":[%s]}`, control.TargetSchemaVersion, raw))
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "endpoints[0].", "")
		msg = strings.ReplaceAll(msg, "endpoints[0]", "body")
		msg = strings.ReplaceAll(msg, "endpoints:", "body:")
		h.fail(c, fmt.Errorf("%w: %s", ErrInvalid, strings.ReplaceAll(msg, "\n", "; ")))
		return control.TargetEndpoint{}, false
	}
	return doc.Endpoints[0], true
}

func deviceIndex(doc *control.TargetStateDoc, name string) int {
	return slices.IndexFunc(doc.Endpoints, func(e control.TargetEndpoint) bool { return e.Name == name })
}

// editDevices runs one devices edit and answers it.
func (h *handler) editDevices(c *gin.Context, status int, action, name string, edit func(*control.TargetStateDoc) error) {
	who, _ := h.Caller(c)
	ts, err := h.Store.EditTargetState(c.Request.Context(), who.TenantUUID, c.Param("uuid"), who.UserID, edit)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditTargetState, ts.AgentUUID, map[string]any{"version": ts.Version, "device": name, "action": action})
	c.JSON(status, gin.H{"device": name, "version": ts.Version, "updatedAt": ts.UpdatedAt})
}

func (h *handler) addDevice(c *gin.Context) {
	dev, ok := h.bindDevice(c)
	if !ok {
		return
	}
	h.editDevices(c, http.StatusCreated, "added", dev.Name, func(doc *control.TargetStateDoc) error {
		if deviceIndex(doc, dev.Name) >= 0 {
			return fmt.Errorf("%w: name: the agent has a device named %q already", ErrConflict, dev.Name)
		}
		if doc.Endpoints == nil {
			doc.Endpoints = []control.TargetEndpoint{}
		}
		doc.Endpoints = append(doc.Endpoints, dev)
		return nil
	})
}

func (h *handler) replaceDevice(c *gin.Context) {
	name := c.Param("name")
	dev, ok := h.bindDevice(c)
	if !ok {
		return
	}
	if dev.Name != name {
		h.fail(c, fmt.Errorf("%w: name: must be the device's name %q, got %q (rename by adding and deleting)", ErrInvalid, name, dev.Name))
		return
	}
	h.editDevices(c, http.StatusOK, "replaced", name, func(doc *control.TargetStateDoc) error {
		i := deviceIndex(doc, name)
		if i < 0 {
			return fmt.Errorf("%w: the agent has no device %q", ErrNotFound, name)
		}
		doc.Endpoints[i] = dev
		return nil
	})
}

func (h *handler) deleteDevice(c *gin.Context) {
	name := c.Param("name")
	h.editDevices(c, http.StatusOK, "deleted", name, func(doc *control.TargetStateDoc) error {
		i := deviceIndex(doc, name)
		if i < 0 {
			return fmt.Errorf("%w: the agent has no device %q", ErrNotFound, name)
		}
		doc.Endpoints = slices.Delete(doc.Endpoints, i, i+1)
		return nil
	})
}
