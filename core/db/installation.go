package db

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
)

// Installation is what migration 0009 recorded about this database.
type Installation struct {
	// ID is the same for every process and every restart that uses the
	// database, and different for another database.
	ID string
	// LegacyClientID is true when the database was in use before 0009:
	// serve-api keeps its host-name MQTT client id there.
	LegacyClientID bool
}

// Installation reads the installation's identity. A database whose row
// was deleted gets a new one, not legacy.
func (d *DB) Installation(ctx context.Context) (Installation, error) {
	w := d.SQL()
	if w == nil {
		return Installation{}, errors.New("installation id: database not open")
	}
	var in Installation
	read := func() error {
		return w.QueryRowContext(ctx, `SELECT id, legacy_client_id FROM installation_identity`).Scan(&in.ID, &in.LegacyClientID)
	}
	err := read()
	if errors.Is(err, sql.ErrNoRows) {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		if _, err := w.ExecContext(ctx, `INSERT INTO installation_identity (id, legacy_client_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			hex.EncodeToString(b), false); err != nil {
			return Installation{}, fmt.Errorf("create installation id: %w", err)
		}
		err = read()
	}
	if err != nil {
		return Installation{}, fmt.Errorf("read installation id: %w", err)
	}
	return in, nil
}
