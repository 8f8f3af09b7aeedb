package db

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/netx"
)

// connectError turns a failure to connect to PostgreSQL into a message
// that names the service, the address and the settings to check, since
// the operator's next step is to fix one of them: "cannot reach
// PostgreSQL at 127.0.0.1:5433 (DB_HOST, DB_PORT): connection refused".
// The original error stays in the chain.
func connectError(cfg config.DB, err error) error {
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	if cause, ok := netx.DialCause(err); ok {
		return &netx.SettingsError{Msg: fmt.Sprintf("cannot reach PostgreSQL at %s (%s): %s", addr, config.EnvNames("db.host", "db.port"), cause), Err: err}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return &netx.SettingsError{Msg: fmt.Sprintf("PostgreSQL at %s refused user %q (%s): %s", addr, cfg.User, config.EnvNames("db.user", "db.password"), pe.Message), Err: err}
		case "3D000": // invalid_catalog_name
			return &netx.SettingsError{Msg: fmt.Sprintf("PostgreSQL at %s has no database %q (%s): %s", addr, cfg.Name, config.EnvNames("db.name"), pe.Message), Err: err}
		}
	}
	return fmt.Errorf("connect to PostgreSQL at %s (%s): %w", addr, config.EnvNames("db.host", "db.port"), err)
}
