package jobs

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
)

// Parameter is one value a template's params ask for as "{{name}}".
type Parameter struct {
	Name     string          `json:"name"`
	Required bool            `json:"required,omitempty"`
	Default  json.RawMessage `json:"default,omitempty"`
}

// Template is a reusable job: a handler, its params with placeholders,
// the parameters they declare and a default per-agent timeout.
type Template struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Handler        string          `json:"handler"`
	Params         json.RawMessage `json:"params"`
	Parameters     []Parameter     `json:"parameters"`
	TimeoutSeconds int             `json:"timeoutSeconds"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
}

// TemplateInput is the body of POST and PUT /jobs/templates.
type TemplateInput struct {
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Handler        string          `json:"handler"`
	Params         json.RawMessage `json:"params"`
	Parameters     []Parameter     `json:"parameters"`
	TimeoutSeconds int             `json:"timeoutSeconds"`
}

var (
	placeholder   = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)
	parameterName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// handlerParams are the params each handler must get (after
// substitution); the agent checks them again.
var handlerParams = map[string][]string{
	control.HandlerRestartEndpoint: {"endpoint"},
	control.HandlerRestartApp:      {"appId"},
	control.HandlerWriteRegister:   {"endpoint", "register", "value"},
	control.HandlerShell:           {"command"},
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// check validates a template and returns its params in normal form.
func (in *TemplateInput) check() error {
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" || len(in.Name) > 128 {
		return invalid("name", "must be 1..128 characters")
	}
	if len(in.Description) > 1024 {
		return invalid("description", "must be at most 1024 characters")
	}
	if !control.KnownHandler(in.Handler) {
		return invalid("handler", "must be one of %s, got %q", strings.Join(control.JobHandlers, ", "), clip(in.Handler))
	}
	params, err := normalParams(in.Params)
	if err != nil {
		return err
	}
	in.Params = params
	if err := checkTimeout(in.TimeoutSeconds); err != nil {
		return err
	}
	declared := map[string]bool{}
	for i, p := range in.Parameters {
		field := fmt.Sprintf("parameters[%d]", i)
		if !parameterName.MatchString(p.Name) {
			return invalid(field+".name", "must be a letter or _ then letters, digits or _, at most 64, got %q", clip(p.Name))
		}
		if declared[p.Name] {
			return invalid(field+".name", "%q is declared twice", p.Name)
		}
		declared[p.Name] = true
		if len(p.Default) > 0 && !json.Valid(p.Default) {
			return invalid(field+".default", "must be JSON")
		}
	}
	for _, m := range placeholder.FindAllSubmatch(in.Params, -1) {
		if !declared[string(m[1])] {
			return invalid("params", "placeholder {{%s}} names no declared parameter", m[1])
		}
	}
	return nil
}

// normalParams checks params is a JSON object within the size limit; an
// absent one is {}.
func normalParams(p json.RawMessage) (json.RawMessage, error) {
	p = bytes.TrimSpace(p)
	if len(p) == 0 || string(p) == "null" {
		return json.RawMessage(`{}`), nil
	}
	if len(p) > control.MaxJobParamsBytes {
		return nil, invalid("params", "must be at most %d bytes, got %d", control.MaxJobParamsBytes, len(p))
	}
	var obj map[string]any
	if p[0] != '{' || json.Unmarshal(p, &obj) != nil {
		return nil, invalid("params", "must be a JSON object")
	}
	return p, nil
}

func checkTimeout(s int) error {
	if s < 0 || time.Duration(s)*time.Second > control.MaxJobTimeout {
		return invalid("timeoutSeconds", "must be 0..%d, got %d", int(control.MaxJobTimeout/time.Second), s)
	}
	return nil
}

// checkHandlerParams checks that resolved params hold what the handler
// needs.
func checkHandlerParams(handler string, params json.RawMessage) error {
	var obj map[string]any
	if err := json.Unmarshal(params, &obj); err != nil {
		return invalid("params", "must be a JSON object")
	}
	for _, k := range handlerParams[handler] {
		if v, ok := obj[k]; !ok || v == nil || v == "" {
			return invalid("params."+k, "is required by handler %s", handler)
		}
	}
	return nil
}

// resolve substitutes the parameter values into the template's params.
// A placeholder that is a whole JSON string takes the value as it is
// (a number stays a number); one inside a longer string takes its text.
// A value for an undeclared parameter, or a required one missing, is
// refused.
func resolve(params json.RawMessage, declared []Parameter, values map[string]json.RawMessage) (json.RawMessage, error) {
	vals := map[string]json.RawMessage{}
	for name, v := range values {
		if !slices.ContainsFunc(declared, func(p Parameter) bool { return p.Name == name }) {
			return nil, invalid("parameters."+clip(name), "is not a parameter of the template")
		}
		vals[name] = v
	}
	for _, p := range declared {
		if _, ok := vals[p.Name]; ok {
			continue
		}
		switch {
		case len(p.Default) > 0:
			vals[p.Name] = p.Default
		case p.Required:
			return nil, invalid("parameters."+p.Name, "is required")
		default:
			vals[p.Name] = json.RawMessage(`""`)
		}
	}
	var doc any
	if err := json.Unmarshal(params, &doc); err != nil {
		return nil, invalid("params", "must be a JSON object")
	}
	out, err := substitute(doc, vals)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode params: %w", err)
	}
	return normalParams(b)
}

func substitute(v any, vals map[string]json.RawMessage) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			s, err := substitute(e, vals)
			if err != nil {
				return nil, err
			}
			x[k] = s
		}
	case []any:
		for i, e := range x {
			s, err := substitute(e, vals)
			if err != nil {
				return nil, err
			}
			x[i] = s
		}
	case string:
		if m := placeholder.FindStringSubmatch(x); m != nil && m[0] == x {
			var val any
			if err := json.Unmarshal(vals[m[1]], &val); err != nil {
				return nil, invalid("parameters."+m[1], "must be JSON")
			}
			return val, nil
		}
		var bad error
		s := placeholder.ReplaceAllStringFunc(x, func(ph string) string {
			name := placeholder.FindStringSubmatch(ph)[1]
			var val any
			if err := json.Unmarshal(vals[name], &val); err != nil {
				bad = invalid("parameters."+name, "must be JSON")
				return ""
			}
			if s, ok := val.(string); ok {
				return s
			}
			return string(vals[name])
		})
		return s, bad
	}
	return v, nil
}

const templateColumns = `id, name, description, handler, params, parameters, timeout_seconds, created_at, updated_at`

func scanTemplate(r interface{ Scan(...any) error }) (Template, error) {
	var t Template
	var params, parameters string
	var created, updated db.Timestamp
	if err := r.Scan(&t.ID, &t.Name, &t.Description, &t.Handler, &params, &parameters, &t.TimeoutSeconds, &created, &updated); err != nil {
		return t, err
	}
	t.Params, t.CreatedAt, t.UpdatedAt = json.RawMessage(params), created.Time, updated.Time
	if err := json.Unmarshal([]byte(parameters), &t.Parameters); err != nil {
		return t, fmt.Errorf("decode template %s parameters: %w", t.ID, err)
	}
	return t, nil
}

func (c *core) templates(ctx context.Context, tenant string) ([]Template, error) {
	rows, err := c.DB.ReadSQL().QueryContext(ctx, `SELECT `+templateColumns+` FROM job_templates WHERE tenant_uuid = $1 ORDER BY name`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list job templates: %w", err)
	}
	defer rows.Close()
	out := []Template{}
	for rows.Next() {
		t, err := scanTemplate(rows)
		if err != nil {
			return nil, fmt.Errorf("list job templates: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (c *core) template(ctx context.Context, tenant, id string) (Template, error) {
	if _, err := codec.ParseUUID(id); err != nil {
		return Template{}, fmt.Errorf("%w: job template %q", ErrNotFound, clip(id))
	}
	t, err := scanTemplate(c.DB.ReadSQL().QueryRowContext(ctx, `SELECT `+templateColumns+` FROM job_templates WHERE id = $1 AND tenant_uuid = $2`, id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("%w: job template %s", ErrNotFound, id)
	}
	if err != nil {
		return t, fmt.Errorf("read job template %s: %w", id, err)
	}
	return t, nil
}

// saveTemplate creates (id "") or replaces a template.
func (c *core) saveTemplate(ctx context.Context, tenant, id string, in TemplateInput) (Template, error) {
	if err := in.check(); err != nil {
		return Template{}, err
	}
	if in.Parameters == nil {
		in.Parameters = []Parameter{}
	}
	parameters, _ := json.Marshal(in.Parameters)
	now := c.now()
	var res sql.Result
	var err error
	if id == "" {
		id = codec.NewUUID().String()
		res, err = c.DB.SQL().ExecContext(ctx, `INSERT INTO job_templates (id, tenant_uuid, name, description, handler, params, parameters, timeout_seconds, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`, id, tenant, in.Name, in.Description, in.Handler, string(in.Params), string(parameters), in.TimeoutSeconds, c.t(now))
	} else {
		if _, perr := codec.ParseUUID(id); perr != nil {
			return Template{}, fmt.Errorf("%w: job template %q", ErrNotFound, clip(id))
		}
		res, err = c.DB.SQL().ExecContext(ctx, `UPDATE job_templates SET name = $3, description = $4, handler = $5, params = $6, parameters = $7,
timeout_seconds = $8, updated_at = $9 WHERE id = $1 AND tenant_uuid = $2`, id, tenant, in.Name, in.Description, in.Handler, string(in.Params), string(parameters), in.TimeoutSeconds, c.t(now))
	}
	if db.IsUniqueViolation(err) {
		return Template{}, fmt.Errorf("%w: a job template named %q exists", ErrConflict, in.Name)
	}
	if err != nil {
		return Template{}, fmt.Errorf("save job template: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Template{}, fmt.Errorf("%w: job template %s", ErrNotFound, id)
	}
	return c.template(ctx, tenant, id)
}

func (c *core) deleteTemplate(ctx context.Context, tenant, id string) error {
	if _, err := codec.ParseUUID(id); err != nil {
		return fmt.Errorf("%w: job template %q", ErrNotFound, clip(id))
	}
	res, err := c.DB.SQL().ExecContext(ctx, `DELETE FROM job_templates WHERE id = $1 AND tenant_uuid = $2`, id, tenant)
	if err != nil {
		return fmt.Errorf("delete job template %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: job template %s", ErrNotFound, id)
	}
	return nil
}
