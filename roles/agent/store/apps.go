package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
)

// Apps is the apps and app_runtime tables: the local (standalone) apps
// target and how the agent reaches the container runtime (docs/apps.md).
type Apps struct {
	db   *db.DB
	cond *condition
}

// List returns the stored apps ordered by id.
func (a *Apps) List(ctx context.Context) (_ []control.TargetApp, err error) {
	defer a.cond.observe(&err)
	rows, err := a.db.SQL().QueryContext(ctx, `SELECT app_id, app_name, services FROM apps ORDER BY app_id`)
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	defer rows.Close()
	out := []control.TargetApp{}
	for rows.Next() {
		var app control.TargetApp
		var svcs string
		if err := rows.Scan(&app.AppID, &app.AppName, &svcs); err != nil {
			return nil, fmt.Errorf("list apps: %w", err)
		}
		if err := json.Unmarshal([]byte(svcs), &app.Services); err != nil {
			return nil, fmt.Errorf("list apps: app %d services: %w", app.AppID, err)
		}
		out = append(out, app)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	return out, nil
}

// Put creates or replaces the app with app.AppID; an AppID of 0 takes
// the next free id. A name another app has answers ErrDuplicate.
func (a *Apps) Put(ctx context.Context, app control.TargetApp) (_ control.TargetApp, err error) {
	defer a.cond.observe(&err)
	if app.Services == nil {
		app.Services = []control.TargetService{}
	}
	svcs, err := json.Marshal(app.Services)
	if err != nil {
		return app, fmt.Errorf("encode app %q: %w", app.AppName, err)
	}
	now := time.Now().UnixMilli()
	var id int
	// The name check and the write are one statement, so two writers
	// cannot both take a name.
	if app.AppID == 0 {
		err = a.db.SQL().QueryRowContext(ctx,
			`INSERT INTO apps (app_id, app_name, services, updated_at)
			 SELECT (SELECT COALESCE(MAX(app_id), 0) + 1 FROM apps), $1, $2, $3
			 WHERE NOT EXISTS (SELECT 1 FROM apps WHERE app_name = $1) RETURNING app_id`,
			app.AppName, string(svcs), now).Scan(&id)
	} else {
		err = a.db.SQL().QueryRowContext(ctx,
			`INSERT INTO apps (app_id, app_name, services, updated_at)
			 SELECT $1, $2, $3, $4 WHERE NOT EXISTS (SELECT 1 FROM apps WHERE app_name = $2 AND app_id <> $1)
			 ON CONFLICT (app_id) DO UPDATE SET app_name = excluded.app_name, services = excluded.services, updated_at = excluded.updated_at
			 RETURNING app_id`,
			app.AppID, app.AppName, string(svcs), now).Scan(&id)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return app, ErrDuplicate
	}
	if err != nil {
		return app, fmt.Errorf("store app %q: %w", app.AppName, err)
	}
	app.AppID = id
	return app, nil
}

// Delete removes an app; ErrNotFound when there is none with that id.
func (a *Apps) Delete(ctx context.Context, appID int) (err error) {
	defer a.cond.observe(&err)
	res, err := a.db.SQL().ExecContext(ctx, `DELETE FROM apps WHERE app_id = $1`, appID)
	if err != nil {
		return fmt.Errorf("delete app %d: %w", appID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// metaRuntime is the agent_meta key of the runtime configuration.
const metaRuntime = "apps.runtime"

// RuntimeConfig returns the stored runtime configuration (JSON);
// ErrNotFound when none was saved.
func (a *Apps) RuntimeConfig(ctx context.Context) (_ []byte, err error) {
	defer a.cond.observe(&err)
	var v string
	err = a.db.SQL().QueryRowContext(ctx, `SELECT value FROM agent_meta WHERE key = $1`, metaRuntime).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read runtime config: %w", err)
	}
	return []byte(v), nil
}

// SetRuntimeConfig saves the runtime configuration (JSON).
func (a *Apps) SetRuntimeConfig(ctx context.Context, cfg []byte) (err error) {
	defer a.cond.observe(&err)
	_, err = a.db.SQL().ExecContext(ctx,
		`INSERT INTO agent_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
		metaRuntime, string(cfg))
	if err != nil {
		return fmt.Errorf("save runtime config: %w", err)
	}
	return nil
}
