package db

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgeplat/edgeplat/config"
)

// connectError turns a failure to connect to PostgreSQL into a message
// that names the service, the address and the settings to check, since
// the operator's next step is to fix one of them: "cannot reach
// PostgreSQL at 127.0.0.1:5433 (DB_HOST, DB_PORT): connection refused".
// The original error stays in the chain.
func connectError(cfg config.DB, err error) error {
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	if cause, ok := dialFailure(err); ok {
		return &settingsError{msg: fmt.Sprintf("cannot reach PostgreSQL at %s (%s): %s", addr, envs("db.host", "db.port"), cause), err: err}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return &settingsError{msg: fmt.Sprintf("PostgreSQL at %s refused user %q (%s): %s", addr, cfg.User, envs("db.user", "db.password"), pe.Message), err: err}
		case "3D000": // invalid_catalog_name
			return &settingsError{msg: fmt.Sprintf("PostgreSQL at %s has no database %q (%s): %s", addr, cfg.Name, envs("db.name"), pe.Message), err: err}
		}
	}
	return fmt.Errorf("connect to PostgreSQL at %s (%s): %w", addr, envs("db.host", "db.port"), err)
}

// settingsError carries a message written for the operator and keeps the
// cause for errors.Is and errors.As.
type settingsError struct {
	msg string
	err error
}

func (e *settingsError) Error() string { return e.msg }
func (e *settingsError) Unwrap() error { return e.err }

// envs names the environment variables of keys, comma-separated.
func envs(keys ...string) string {
	names := make([]string, len(keys))
	for i, key := range keys {
		k, ok := config.KeyByName(key)
		if !ok {
			panic("BUG: unknown config key " + key)
		}
		names[i] = k.Env
	}
	return strings.Join(names, ", ")
}

// dialFailure reports whether err is a failure to open a connection at
// all (refused, unreachable, unknown host, timed out), and its cause
// without the address, which the message names already.
func dialFailure(err error) (string, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return "", false
	}
	var sc *os.SyscallError
	if errors.As(op.Err, &sc) {
		return sc.Err.Error(), true
	}
	return op.Err.Error(), true
}
