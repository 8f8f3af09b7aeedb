package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Endpoints is the endpoints table: the protocol endpoints the agent
// polls, each kept as its JSON document.
type Endpoints struct {
	db   *db.DB
	cond *condition
}

// Create stores a new endpoint; ErrDuplicate when its name is
// taken.
func (e *Endpoints) Create(ctx context.Context, ep adapters.Endpoint) (err error) {
	defer e.cond.observe(&err)
	body, err := json.Marshal(ep)
	if err != nil {
		return fmt.Errorf("encode endpoint %s: %w", ep.Name, err)
	}
	now := nowMS()
	_, err = e.db.SQL().ExecContext(ctx,
		`INSERT INTO endpoints (uuid, name, protocol, enabled, body, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
		ep.UUID, ep.Name, ep.Protocol, ep.Enabled, string(body), now)
	if db.IsUniqueViolation(err) {
		return fmt.Errorf("endpoint name %q: %w", ep.Name, ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("insert endpoint %s: %w", ep.Name, err)
	}
	return nil
}

// Update replaces a stored endpoint, found by UUID.
func (e *Endpoints) Update(ctx context.Context, ep adapters.Endpoint) (err error) {
	defer e.cond.observe(&err)
	body, err := json.Marshal(ep)
	if err != nil {
		return fmt.Errorf("encode endpoint %s: %w", ep.Name, err)
	}
	res, err := e.db.SQL().ExecContext(ctx,
		`UPDATE endpoints SET name = $2, protocol = $3, enabled = $4, body = $5, updated_at = $6 WHERE uuid = $1`,
		ep.UUID, ep.Name, ep.Protocol, ep.Enabled, string(body), nowMS())
	if db.IsUniqueViolation(err) {
		return fmt.Errorf("endpoint name %q: %w", ep.Name, ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("update endpoint %s: %w", ep.UUID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("endpoint %s: %w", ep.UUID, ErrNotFound)
	}
	return nil
}

// Get returns the endpoint whose UUID or, failing that, name is ref.
func (e *Endpoints) Get(ctx context.Context, ref string) (_ adapters.Endpoint, err error) {
	defer e.cond.observe(&err)
	var body string
	err = e.db.ReadSQL().QueryRowContext(ctx,
		`SELECT body FROM endpoints WHERE uuid = $1 OR name = $1 ORDER BY uuid = $1 DESC LIMIT 1`, ref).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return adapters.Endpoint{}, fmt.Errorf("endpoint %q: %w", ref, ErrNotFound)
	}
	if err != nil {
		return adapters.Endpoint{}, fmt.Errorf("read endpoint %s: %w", ref, err)
	}
	return decodeEndpoint(body)
}

// List returns the endpoints by name, of one protocol when protocol is set.
func (e *Endpoints) List(ctx context.Context, protocol string) (_ []adapters.Endpoint, err error) {
	defer e.cond.observe(&err)
	rows, err := e.db.ReadSQL().QueryContext(ctx,
		`SELECT body FROM endpoints WHERE $1 = '' OR protocol = $1 ORDER BY name`, protocol)
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	defer rows.Close()
	eps := []adapters.Endpoint{}
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("list endpoints: %w", err)
		}
		ep, err := decodeEndpoint(body)
		if err != nil {
			return nil, err
		}
		eps = append(eps, ep)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	return eps, nil
}

// Delete removes an endpoint by UUID; ErrNotFound when absent.
func (e *Endpoints) Delete(ctx context.Context, uuid string) (err error) {
	defer e.cond.observe(&err)
	res, err := e.db.SQL().ExecContext(ctx, `DELETE FROM endpoints WHERE uuid = $1`, uuid)
	if err != nil {
		return fmt.Errorf("delete endpoint %s: %w", uuid, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("endpoint %s: %w", uuid, ErrNotFound)
	}
	return nil
}

// DeleteAll removes every endpoint and returns their UUIDs.
func (e *Endpoints) DeleteAll(ctx context.Context) (_ []string, err error) {
	defer e.cond.observe(&err)
	rows, err := e.db.SQL().QueryContext(ctx, `DELETE FROM endpoints RETURNING uuid`)
	if err != nil {
		return nil, fmt.Errorf("delete endpoints: %w", err)
	}
	defer rows.Close()
	var uuids []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("delete endpoints: %w", err)
		}
		uuids = append(uuids, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("delete endpoints: %w", err)
	}
	return uuids, nil
}

func decodeEndpoint(body string) (adapters.Endpoint, error) {
	var ep adapters.Endpoint
	if err := json.Unmarshal([]byte(body), &ep); err != nil {
		return ep, fmt.Errorf("decode stored endpoint: %w", err)
	}
	return ep, nil
}
