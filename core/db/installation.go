package db

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
)

// InstallationID is the id that migration 0009 gave this database, the
// same for every process and every restart that uses it, and different
// for another database. A database whose row was deleted gets a new one.
func (d *DB) InstallationID(ctx context.Context) (string, error) {
	w := d.SQL()
	if w == nil {
		return "", errors.New("installation id: database not open")
	}
	var id string
	err := w.QueryRowContext(ctx, `SELECT id FROM installation_identity`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		if _, err := w.ExecContext(ctx, `INSERT INTO installation_identity (id) VALUES ($1) ON CONFLICT DO NOTHING`, hex.EncodeToString(b)); err != nil {
			return "", fmt.Errorf("create installation id: %w", err)
		}
		err = w.QueryRowContext(ctx, `SELECT id FROM installation_identity`).Scan(&id)
	}
	if err != nil {
		return "", fmt.Errorf("read installation id: %w", err)
	}
	return id, nil
}
