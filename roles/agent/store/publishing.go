package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edgeplat/edgeplat/core/db"
)

// Publishing is the publishing configuration: the publish_destinations,
// publish_subscriptions and protocol_outputs tables.
type Publishing struct {
	db   *db.DB
	cond *condition
}

// Destination is a place the agent publishes to.
type Destination struct {
	ID      int64           `json:"id"`
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	Config  json.RawMessage `json:"config_json"`
	Enabled bool            `json:"enabled"`
}

// Subscription routes endpoint batches to a destination.
type Subscription struct {
	ID            int64           `json:"id"`
	DestinationID int64           `json:"publish_destination_id"`
	Topics        []string        `json:"topics"`
	PayloadFormat string          `json:"payload_format"`
	Compression   string          `json:"compression"`
	Enabled       bool            `json:"enabled"`
	Route         json.RawMessage `json:"route_json"`
}

// ProtocolOutput holds a protocol's output settings.
type ProtocolOutput struct {
	Protocol      string          `json:"protocol"`
	PayloadFormat string          `json:"payload_format"`
	DriftOptions  json.RawMessage `json:"drift_options"`
}

// nullJSON stores an empty or null document as SQL NULL.
func nullJSON(doc json.RawMessage) any {
	if len(doc) == 0 || string(doc) == "null" {
		return nil
	}
	return string(doc)
}

func rawJSON(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return json.RawMessage("null")
	}
	return json.RawMessage(s.String)
}

// CreateDestination stores d and returns it with its id; ErrDuplicate when
// the name is taken.
func (p *Publishing) CreateDestination(ctx context.Context, d Destination) (_ Destination, err error) {
	defer p.cond.observe(&err)
	now := nowMS()
	err = p.db.SQL().QueryRowContext(ctx,
		`INSERT INTO publish_destinations (name, type, config_json, enabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5) RETURNING id`,
		d.Name, d.Type, nullJSON(d.Config), d.Enabled, now).Scan(&d.ID)
	if db.IsUniqueViolation(err) {
		return d, fmt.Errorf("destination name %q: %w", d.Name, ErrDuplicate)
	}
	if err != nil {
		return d, fmt.Errorf("insert destination: %w", err)
	}
	if d.Config == nil {
		d.Config = json.RawMessage("null")
	}
	return d, nil
}

// UpdateDestination replaces a destination by id.
func (p *Publishing) UpdateDestination(ctx context.Context, d Destination) (err error) {
	defer p.cond.observe(&err)
	res, err := p.db.SQL().ExecContext(ctx,
		`UPDATE publish_destinations SET name = $2, type = $3, config_json = $4, enabled = $5, updated_at = $6 WHERE id = $1`,
		d.ID, d.Name, d.Type, nullJSON(d.Config), d.Enabled, nowMS())
	if db.IsUniqueViolation(err) {
		return fmt.Errorf("destination name %q: %w", d.Name, ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("update destination: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("destination %d: %w", d.ID, ErrNotFound)
	}
	return nil
}

// Destination returns one destination.
func (p *Publishing) Destination(ctx context.Context, id int64) (_ Destination, err error) {
	defer p.cond.observe(&err)
	d := Destination{ID: id}
	var cfg sql.NullString
	err = p.db.SQL().QueryRowContext(ctx,
		`SELECT name, type, config_json, enabled FROM publish_destinations WHERE id = $1`, id).Scan(&d.Name, &d.Type, &cfg, &d.Enabled)
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("destination %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("read destination: %w", err)
	}
	d.Config = rawJSON(cfg)
	return d, nil
}

// Destinations lists destinations by id, only enabled ones unless
// includeDisabled.
func (p *Publishing) Destinations(ctx context.Context, includeDisabled bool) (_ []Destination, err error) {
	defer p.cond.observe(&err)
	rows, err := p.db.ReadSQL().QueryContext(ctx,
		`SELECT id, name, type, config_json, enabled FROM publish_destinations WHERE $1 OR enabled = 1 ORDER BY id`, includeDisabled)
	if err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
	}
	defer rows.Close()
	out := []Destination{}
	for rows.Next() {
		var d Destination
		var cfg sql.NullString
		if err := rows.Scan(&d.ID, &d.Name, &d.Type, &cfg, &d.Enabled); err != nil {
			return nil, fmt.Errorf("list destinations: %w", err)
		}
		d.Config = rawJSON(cfg)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
	}
	return out, nil
}

// DeleteDestination removes a destination and, by cascade, its
// subscriptions.
func (p *Publishing) DeleteDestination(ctx context.Context, id int64) (err error) {
	defer p.cond.observe(&err)
	res, err := p.db.SQL().ExecContext(ctx, `DELETE FROM publish_destinations WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete destination: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("destination %d: %w", id, ErrNotFound)
	}
	return nil
}

// CreateSubscription stores sub and returns it with its id.
func (p *Publishing) CreateSubscription(ctx context.Context, sub Subscription) (_ Subscription, err error) {
	defer p.cond.observe(&err)
	topics, err := json.Marshal(sub.Topics)
	if err != nil {
		return sub, err
	}
	now := nowMS()
	err = p.db.SQL().QueryRowContext(ctx, `INSERT INTO publish_subscriptions
		(publish_destination_id, topics, payload_format, compression, enabled, route_json, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING id`,
		sub.DestinationID, string(topics), sub.PayloadFormat, sub.Compression, sub.Enabled, nullJSON(sub.Route), now).Scan(&sub.ID)
	if err != nil {
		return sub, fmt.Errorf("insert subscription: %w", err)
	}
	if sub.Route == nil {
		sub.Route = json.RawMessage("null")
	}
	return sub, nil
}

// UpdateSubscription replaces a subscription by id.
func (p *Publishing) UpdateSubscription(ctx context.Context, sub Subscription) (err error) {
	defer p.cond.observe(&err)
	topics, err := json.Marshal(sub.Topics)
	if err != nil {
		return err
	}
	res, err := p.db.SQL().ExecContext(ctx, `UPDATE publish_subscriptions SET publish_destination_id = $2, topics = $3,
		payload_format = $4, compression = $5, enabled = $6, route_json = $7, updated_at = $8 WHERE id = $1`,
		sub.ID, sub.DestinationID, string(topics), sub.PayloadFormat, sub.Compression, sub.Enabled, nullJSON(sub.Route), nowMS())
	if err != nil {
		return fmt.Errorf("update subscription: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("subscription %d: %w", sub.ID, ErrNotFound)
	}
	return nil
}

// Subscription returns one subscription.
func (p *Publishing) Subscription(ctx context.Context, id int64) (_ Subscription, err error) {
	defer p.cond.observe(&err)
	subs, err := p.subscriptions(ctx, `WHERE id = $1`, id)
	if err != nil {
		return Subscription{}, err
	}
	if len(subs) == 0 {
		return Subscription{}, fmt.Errorf("subscription %d: %w", id, ErrNotFound)
	}
	return subs[0], nil
}

// Subscriptions lists subscriptions by id, of one destination when
// destination > 0, only enabled ones unless includeDisabled.
func (p *Publishing) Subscriptions(ctx context.Context, destination int64, includeDisabled bool) (_ []Subscription, err error) {
	defer p.cond.observe(&err)
	return p.subscriptions(ctx, `WHERE ($1 = 0 OR publish_destination_id = $1) AND ($2 OR enabled = 1)`, destination, includeDisabled)
}

func (p *Publishing) subscriptions(ctx context.Context, where string, args ...any) ([]Subscription, error) {
	rows, err := p.db.SQL().QueryContext(ctx, `SELECT id, publish_destination_id, topics, payload_format, compression, enabled, route_json
		FROM publish_subscriptions `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	defer rows.Close()
	out := []Subscription{}
	for rows.Next() {
		var sub Subscription
		var topics string
		var route sql.NullString
		if err := rows.Scan(&sub.ID, &sub.DestinationID, &topics, &sub.PayloadFormat, &sub.Compression, &sub.Enabled, &route); err != nil {
			return nil, fmt.Errorf("list subscriptions: %w", err)
		}
		if err := json.Unmarshal([]byte(topics), &sub.Topics); err != nil {
			return nil, fmt.Errorf("subscription %d topics: %w", sub.ID, err)
		}
		sub.Route = rawJSON(route)
		out = append(out, sub)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	return out, nil
}

// DeleteSubscription removes a subscription.
func (p *Publishing) DeleteSubscription(ctx context.Context, id int64) (err error) {
	defer p.cond.observe(&err)
	res, err := p.db.SQL().ExecContext(ctx, `DELETE FROM publish_subscriptions WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete subscription: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("subscription %d: %w", id, ErrNotFound)
	}
	return nil
}

// ProtocolOutputs lists the stored protocol outputs.
func (p *Publishing) ProtocolOutputs(ctx context.Context) (_ []ProtocolOutput, err error) {
	defer p.cond.observe(&err)
	return p.protocolOutputs(ctx)
}

func (p *Publishing) protocolOutputs(ctx context.Context) ([]ProtocolOutput, error) {
	rows, err := p.db.SQL().QueryContext(ctx, `SELECT protocol, payload_format, drift_options FROM protocol_outputs ORDER BY protocol`)
	if err != nil {
		return nil, fmt.Errorf("list protocol outputs: %w", err)
	}
	defer rows.Close()
	out := []ProtocolOutput{}
	for rows.Next() {
		var o ProtocolOutput
		var drift sql.NullString
		if err := rows.Scan(&o.Protocol, &o.PayloadFormat, &drift); err != nil {
			return nil, fmt.Errorf("list protocol outputs: %w", err)
		}
		o.DriftOptions = rawJSON(drift)
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list protocol outputs: %w", err)
	}
	return out, nil
}

// SetDriftOptions stores a protocol's drift options (nil clears them) and
// returns the protocol's output.
func (p *Publishing) SetDriftOptions(ctx context.Context, protocol string, drift json.RawMessage) (_ ProtocolOutput, err error) {
	defer p.cond.observe(&err)
	_, err = p.db.SQL().ExecContext(ctx, `INSERT INTO protocol_outputs (protocol, drift_options, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (protocol) DO UPDATE SET drift_options = excluded.drift_options, updated_at = excluded.updated_at`,
		protocol, nullJSON(drift), nowMS())
	if err != nil {
		return ProtocolOutput{}, fmt.Errorf("set drift options: %w", err)
	}
	outs, err := p.protocolOutputs(ctx)
	if err != nil {
		return ProtocolOutput{}, err
	}
	for _, o := range outs {
		if o.Protocol == protocol {
			return o, nil
		}
	}
	return ProtocolOutput{}, fmt.Errorf("protocol output %s: %w", protocol, ErrNotFound)
}
