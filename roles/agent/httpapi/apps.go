package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/httpx"
)

// appRoutes are the handlers of the apps routes (docs/apps.md, section
// Routes); the log stream is in appslogs.go.
type appRoutes struct{ routes }

// RegisterApps adds the apps routes and the runtime configuration routes.
func RegisterApps(g *gin.RouterGroup, d Deps) {
	r := appRoutes{routes{Deps: d}}
	g.GET("/apps", r.list)
	g.POST("/apps", r.create)
	g.GET("/apps/:appId", r.get)
	g.DELETE("/apps/:appId", r.delete)
	g.POST("/apps/:appId/start", r.startApp)
	g.POST("/apps/:appId/stop", r.stopApp)
	g.POST("/apps/:appId/services", r.addService)
	g.PUT("/apps/:appId/services/:serviceName", r.putService)
	g.DELETE("/apps/:appId/services/:serviceName", r.deleteService)
	g.POST("/apps/:appId/services/:serviceName/:action", r.serviceAction)
	g.GET("/apps/:appId/services/:serviceName/logs", r.logs)
	g.POST("/restart", r.restart)
	g.POST("/purge", r.purge)
	registerDocker(g, d)
}

func (r appRoutes) list(c *gin.Context) {
	st, err := r.Apps.State(c.Request.Context())
	if err != nil {
		r.appFailed(c, "list apps", 0, "", err)
		return
	}
	if st.Apps == nil {
		st.Apps = []control.AppState{}
	}
	c.JSON(http.StatusOK, st)
}

// get answers the app with its first service's fields at the top, as
// clients that know one service per app read it, and every service.
func (r appRoutes) get(c *gin.Context) {
	id, ok := appID(c)
	if !ok {
		return
	}
	st, err := r.Apps.State(c.Request.Context())
	if err != nil {
		r.appFailed(c, "read app", id, "", err)
		return
	}
	app, found := findApp(st, id)
	if !found {
		fail(c, http.StatusNotFound, "app %d not found", id)
		return
	}
	out := gin.H{"appId": app.AppID, "appName": app.AppName, "services": app.Services}
	if len(app.Services) > 0 {
		s := app.Services[0]
		out["serviceName"], out["imageName"], out["containerId"] = s.ServiceName, s.ImageName, s.ContainerID
		out["state"], out["status"], out["config"] = s.State, s.Status, s.Config
	}
	c.JSON(http.StatusOK, out)
}

func (r appRoutes) create(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	app, err := parseApp(body)
	if err != nil {
		fail(c, http.StatusBadRequest, "%s", err.Error())
		return
	}
	made, err := r.Apps.CreateApp(c.Request.Context(), app)
	if err != nil {
		r.appFailed(c, "create app", app.AppID, "", err)
		return
	}
	r.Log.Info("app created", "app_id", made.AppID, "app", made.AppName, "services", len(made.Services))
	c.JSON(http.StatusCreated, gin.H{"appId": made.AppID, "appName": made.AppName})
}

func (r appRoutes) delete(c *gin.Context) {
	id, ok := appID(c)
	if !ok {
		return
	}
	if err := r.Apps.DeleteApp(c.Request.Context(), id); err != nil {
		r.appFailed(c, "delete app", id, "", err)
		return
	}
	r.Log.Info("app deleted", "app_id", id)
	c.Status(http.StatusNoContent)
}

func (r appRoutes) startApp(c *gin.Context) { r.actApp(c, ActionStart, "started") }
func (r appRoutes) stopApp(c *gin.Context)  { r.actApp(c, ActionStop, "stopped") }

// actApp starts or stops every service of an app and answers with the
// first service's container.
func (r appRoutes) actApp(c *gin.Context, action AppAction, done string) {
	id, ok := appID(c)
	if !ok {
		return
	}
	var in struct {
		Force bool `json:"force"`
	}
	if !bindOptional(c, &in) {
		return
	}
	app, err := r.Apps.Act(c.Request.Context(), id, "", action, in.Force)
	if err != nil {
		r.appFailed(c, string(action)+" app", id, "", err)
		return
	}
	containerID := ""
	if len(app.Services) > 0 {
		containerID = app.Services[0].ContainerID
	}
	c.JSON(http.StatusOK, gin.H{"containerId": containerID, "status": done})
}

func (r appRoutes) addService(c *gin.Context) {
	id, ok := appID(c)
	if !ok {
		return
	}
	body, ok := readBody(c)
	if !ok {
		return
	}
	svc, err := control.ParseService("", body)
	if err != nil {
		fail(c, http.StatusBadRequest, "%s", oneLine(err))
		return
	}
	made, err := r.Apps.AddService(c.Request.Context(), id, svc)
	if err != nil {
		r.appFailed(c, "add service", id, svc.ServiceName, err)
		return
	}
	c.JSON(http.StatusCreated, made)
}

// putService replaces a service. The body may leave serviceName out (the
// path names it); when it names one, it must be the path's: a rename is a
// new service and a delete.
func (r appRoutes) putService(c *gin.Context) {
	id, ok := appID(c)
	if !ok {
		return
	}
	name := c.Param("serviceName")
	body, ok := readBody(c)
	if !ok {
		return
	}
	var obj map[string]json.RawMessage
	if err := httpx.DecodeStrict(body, &obj); err != nil || obj == nil {
		fail(c, http.StatusBadRequest, "the body must be a service object")
		return
	}
	if raw, set := obj["serviceName"]; set {
		var got string
		if json.Unmarshal(raw, &got) == nil && got != name {
			fail(c, http.StatusBadRequest, "serviceName: must be %q as in the path, got %q; a service is renamed by adding the new one and deleting the old", name, got)
			return
		}
	} else {
		obj["serviceName"], _ = json.Marshal(name)
	}
	body, err := json.Marshal(obj)
	if err != nil {
		r.respond(c, "update service", fmt.Errorf("encode service: %w", err))
		return
	}
	svc, err := control.ParseService("", body)
	if err != nil {
		fail(c, http.StatusBadRequest, "%s", oneLine(err))
		return
	}
	made, err := r.Apps.PutService(c.Request.Context(), id, svc)
	if err != nil {
		r.appFailed(c, "update service", id, name, err)
		return
	}
	r.Log.Info("service updated", "app_id", id, "service", name, "image", made.ImageName)
	c.JSON(http.StatusOK, made)
}

func (r appRoutes) deleteService(c *gin.Context) {
	id, ok := appID(c)
	if !ok {
		return
	}
	name := c.Param("serviceName")
	if err := r.Apps.DeleteService(c.Request.Context(), id, name); err != nil {
		r.appFailed(c, "delete service", id, name, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (r appRoutes) serviceAction(c *gin.Context) {
	id, ok := appID(c)
	if !ok {
		return
	}
	name := c.Param("serviceName")
	action := AppAction(c.Param("action"))
	switch action {
	case ActionStart, ActionStop, ActionRestart:
	default:
		fail(c, http.StatusBadRequest, "action: must be start, stop or restart, got %q", clipParam(string(action)))
		return
	}
	var in struct {
		Force bool `json:"force"`
	}
	if !bindOptional(c, &in) {
		return
	}
	if _, err := r.Apps.Act(c.Request.Context(), id, name, action, in.Force); err != nil {
		r.appFailed(c, string(action)+" service", id, name, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"appId": id, "serviceName": name, "action": action})
}

// appForce is the body of POST /v1/restart and /v1/purge.
type appForce struct {
	AppID *int `json:"appId"`
	Force bool `json:"force"`
}

// bindAppForce reads an appForce body whose appId is required.
func bindAppForce(c *gin.Context) (int, bool, bool) {
	var in appForce
	if !bind(c, &in) {
		return 0, false, false
	}
	if in.AppID == nil {
		fail(c, http.StatusBadRequest, "appId: is required")
		return 0, false, false
	}
	if *in.AppID < 1 {
		fail(c, http.StatusBadRequest, "appId: must be a positive integer, got %d", *in.AppID)
		return 0, false, false
	}
	return *in.AppID, in.Force, true
}

// restart restarts every service of an app.
func (r appRoutes) restart(c *gin.Context) {
	id, force, ok := bindAppForce(c)
	if !ok {
		return
	}
	if _, err := r.Apps.Act(c.Request.Context(), id, "", ActionRestart, force); err != nil {
		r.appFailed(c, "restart app", id, "", err)
		return
	}
	c.String(http.StatusOK, "OK")
}

// purge removes an app's volumes; its definition stays.
func (r appRoutes) purge(c *gin.Context) {
	id, force, ok := bindAppForce(c)
	if !ok {
		return
	}
	if err := r.Apps.Purge(c.Request.Context(), id, force); err != nil {
		r.appFailed(c, "purge app", id, "", err)
		return
	}
	r.Log.Info("app purged", "app_id", id, "force", force)
	c.String(http.StatusOK, "OK")
}

// appFailed answers an error of the Apps interface: ErrNotFound as a 404
// naming the app or the service, ErrDuplicate a 409, ErrRuntimeDown a
// 503 with the reason, the rest as respond does.
func (r appRoutes) appFailed(c *gin.Context, what string, id int, service string, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		// The interface does not say which of the two is missing; one
		// State call tells, on this error path only.
		if service != "" && r.appExists(c.Request.Context(), id) {
			fail(c, http.StatusNotFound, "app %d has no service %q", id, service)
			return
		}
		fail(c, http.StatusNotFound, "app %d not found", id)
	case errors.Is(err, ErrDuplicate):
		fail(c, http.StatusConflict, "app %d has a service %q already", id, service)
	case errors.Is(err, ErrRuntimeDown):
		fail(c, http.StatusServiceUnavailable, "%s", err.Error())
	default:
		r.respond(c, what, err)
	}
}

func (r appRoutes) appExists(ctx context.Context, id int) bool {
	st, err := r.Apps.State(ctx)
	if err != nil {
		return false
	}
	_, found := findApp(st, id)
	return found
}

func findApp(st control.AppsState, id int) (control.AppState, bool) {
	for _, a := range st.Apps {
		if a.AppID == id {
			return a, true
		}
	}
	return control.AppState{}, false
}

// appID reads the :appId path parameter or answers 400 naming it.
func appID(c *gin.Context) (int, bool) {
	s := c.Param("appId")
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || strings.HasPrefix(s, "+") || strings.HasPrefix(s, "0") {
		fail(c, http.StatusBadRequest, "appId: must be a positive integer, got %q", clipParam(s))
		return 0, false
	}
	return n, true
}

// bindOptional decodes a body that may be absent: an empty one leaves
// dst as it is.
func bindOptional(c *gin.Context, dst any) bool {
	body, ok := httpx.ReadBodyAllowEmpty(c, MaxBody, WriteError)
	if !ok {
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return true
	}
	if err := httpx.DecodeStrict(body, dst); err != nil {
		fail(c, http.StatusBadRequest, "%s", err.Error())
		return false
	}
	return true
}

// parseApp reads the body of POST /v1/apps with the target-state parser,
// so the rules and the error paths are the cloud's, less the "apps[0]."
// prefix: the body is one app. appId is optional here (0: the agent
// assigns one).
func parseApp(body []byte) (control.TargetApp, error) {
	var obj map[string]json.RawMessage
	if err := httpx.DecodeStrict(body, &obj); err != nil {
		return control.TargetApp{}, err
	}
	if obj == nil {
		return control.TargetApp{}, errors.New("the body must be an app object: {appName, services}")
	}
	_, hasID := obj["appId"]
	if !hasID {
		// A valid placeholder, so the parser's id rule passes; reset
		// below.
		obj["appId"] = json.RawMessage("1")
	}
	one, err := json.Marshal([]map[string]json.RawMessage{obj})
	if err != nil {
		return control.TargetApp{}, fmt.Errorf("encode app: %w", err)
	}
	apps, err := control.ParseApps(one)
	if err != nil {
		return control.TargetApp{}, errors.New(unprefix(err, "apps[0]"))
	}
	if len(apps) != 1 {
		panic(fmt.Sprintf("BUG: one app parsed into %d without an error", len(apps)))
	}
	app := apps[0]
	if !hasID {
		app.AppID = 0
	}
	return app, nil
}

// unprefix renders err's path errors on one line with prefix (and the
// dot after it) cut from their paths.
func unprefix(err error, prefix string) string {
	var parts []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var pe *control.PathError
		if errors.As(e, &pe) {
			p := strings.TrimPrefix(strings.TrimPrefix(pe.Path, prefix), ".")
			if p == "" {
				parts = append(parts, pe.Msg)
			} else {
				parts = append(parts, p+": "+pe.Msg)
			}
			return
		}
		parts = append(parts, e.Error())
	}
	walk(err)
	return strings.Join(parts, "; ")
}

// oneLine is err with its joined errors on one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// clipParam shortens a client's value quoted back in an error.
func clipParam(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
