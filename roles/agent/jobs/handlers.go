package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/edgeplat/edgeplat/core/control"
)

var (
	errUnknownHandler = errors.New("unknown handler")
	errShellDisabled  = errors.New("the shell handler is disabled: agent.jobs_shell is false in the agent's local configuration")
	errNoApps         = errors.New("this agent does not manage apps")
)

// handlers run the work a dispatch names.
type handlers struct {
	actions Actions
	apps    AppRestarter
	shell   bool
	log     *slog.Logger
}

// run runs the handler d names under ctx.
func (h handlers) run(ctx context.Context, d control.JobDispatch) (outcome, error) {
	switch d.Handler {
	case control.HandlerReboot:
		// The reboot comes after the final report: the restart stops
		// this service.
		return outcome{result: "rebooting", after: func() {
			if err := h.actions.Reboot(); err != nil {
				h.log.Warn("job reboot not started", "job", d.JobID, "err", err)
			}
		}}, nil
	case control.HandlerSync:
		v, err := h.actions.Sync(ctx)
		if err != nil {
			return outcome{}, err
		}
		return outcome{result: fmt.Sprintf("target state version %d", v), exitData: map[string]any{"version": v}}, nil
	case control.HandlerRestartEndpoint:
		endpoint, err := stringParam(d.Params, "endpoint")
		if err != nil {
			return outcome{}, err
		}
		if err := h.actions.RestartEndpoint(ctx, endpoint); err != nil {
			return outcome{}, err
		}
		return outcome{result: fmt.Sprintf("endpoint %q restarted", endpoint)}, nil
	case control.HandlerRestartApp:
		return h.restartApp(ctx, d.Params)
	case control.HandlerWriteRegister:
		return h.writeRegister(ctx, d.Params)
	case control.HandlerUploadLogs:
		res, err := h.actions.UploadLogs(ctx)
		return outcome{result: res}, err
	case control.HandlerCollectDiagnostics:
		doc, err := h.actions.Diagnostics(ctx)
		if err != nil {
			return outcome{}, err
		}
		out := outcome{exitData: doc}
		// exitData is bounded tighter than the result: a large document
		// goes whole into the result instead of being cut.
		if b, err := json.Marshal(doc); err == nil && len(b) > control.MaxJobExitBytes {
			out = outcome{result: string(b), exitData: map[string]any{"inResult": true}}
		}
		return out, nil
	case control.HandlerShell:
		if !h.shell {
			return outcome{}, errShellDisabled
		}
		command, err := stringParam(d.Params, "command")
		if err != nil {
			return outcome{}, err
		}
		return shell(ctx, command)
	}
	return outcome{}, fmt.Errorf("%w %q: this agent knows %v", errUnknownHandler, d.Handler, control.JobHandlers)
}

func (h handlers) writeRegister(ctx context.Context, raw json.RawMessage) (outcome, error) {
	var p struct {
		Endpoint string          `json:"endpoint"`
		Register string          `json:"register"`
		Value    json.RawMessage `json:"value"`
	}
	if err := params(raw, &p); err != nil {
		return outcome{}, err
	}
	if p.Endpoint == "" || p.Register == "" || len(p.Value) == 0 || string(p.Value) == "null" {
		return outcome{}, fmt.Errorf("%w: endpoint, register and value are required", ErrInvalidParams)
	}
	var value any
	dec := json.NewDecoder(bytes.NewReader(p.Value))
	dec.UseNumber() // so a 64-bit integer reaches the adapter exactly
	if err := dec.Decode(&value); err != nil {
		return outcome{}, fmt.Errorf("%w: value: %v", ErrInvalidParams, err)
	}
	written, err := h.actions.Write(ctx, p.Endpoint, p.Register, value)
	if err != nil {
		return outcome{}, err
	}
	return outcome{result: fmt.Sprintf("wrote %v to %s of %q", written, p.Register, p.Endpoint),
		exitData: map[string]any{"endpoint": p.Endpoint, "register": p.Register, "value": written}}, nil
}

// restartApp runs restart-app: params {appId}, a positive integer (a
// string of digits is taken too, as a template placeholder inside a
// string gives one).
func (h handlers) restartApp(ctx context.Context, raw json.RawMessage) (outcome, error) {
	var p struct {
		AppID json.RawMessage `json:"appId"`
	}
	if err := params(raw, &p); err != nil {
		return outcome{}, err
	}
	if len(p.AppID) == 0 || string(p.AppID) == "null" {
		return outcome{}, fmt.Errorf("%w: appId is required", ErrInvalidParams)
	}
	id, err := strconv.Atoi(strings.Trim(string(p.AppID), `"`))
	if err != nil || id <= 0 {
		return outcome{}, fmt.Errorf("%w: appId must be a positive integer, got %.40s", ErrInvalidParams, p.AppID)
	}
	if h.apps == nil {
		return outcome{}, errNoApps
	}
	if err := h.apps.RestartApp(ctx, id); err != nil {
		return outcome{}, err
	}
	return outcome{result: fmt.Sprintf("app %d restarted", id), exitData: map[string]any{"appId": id}}, nil
}

// stringParam decodes params that are one required string, name.
func stringParam(raw json.RawMessage, name string) (string, error) {
	var p map[string]string
	if err := params(raw, &p); err != nil {
		return "", err
	}
	for k := range p {
		if k != name {
			return "", fmt.Errorf("%w: unknown field %q", ErrInvalidParams, k)
		}
	}
	if p[name] == "" {
		return "", fmt.Errorf("%w: %s is required", ErrInvalidParams, name)
	}
	return p[name], nil
}

// params decodes a handler's params strictly: a misspelt name is an
// invalid_params failure, not a silent default.
func params(raw json.RawMessage, dst any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidParams, err)
	}
	return nil
}
