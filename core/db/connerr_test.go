package db

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgeplat/edgeplat/config"
)

func TestConnectErrorNamesServiceAddressAndSettings(t *testing.T) {
	cfg := config.DB{Host: "db.example", Port: 5433, User: "ops", Name: "plant"}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "refused", err: fmt.Errorf("wrapped: %w", refused),
			want: "cannot reach PostgreSQL at db.example:5433 (DB_HOST, DB_PORT): connection refused"},
		{name: "unknown host", err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "db.example"}},
			want: "cannot reach PostgreSQL at db.example:5433 (DB_HOST, DB_PORT): lookup db.example: no such host"},
		{name: "wrong password", err: &pgconn.PgError{Code: "28P01", Message: `password authentication failed for user "ops"`},
			want: `PostgreSQL at db.example:5433 refused user "ops" (DB_USER, DB_PASSWORD): password authentication failed for user "ops"`},
		{name: "no database", err: &pgconn.PgError{Code: "3D000", Message: `database "plant" does not exist`},
			want: `PostgreSQL at db.example:5433 has no database "plant" (DB_NAME): database "plant" does not exist`},
		{name: "anything else", err: errors.New("tls: handshake failure"),
			want: "connect to PostgreSQL at db.example:5433 (DB_HOST, DB_PORT): tls: handshake failure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := connectError(cfg, tt.err)
			if err.Error() != tt.want {
				t.Errorf("got  %q\nwant %q", err, tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Error("the cause is not in the chain")
			}
		})
	}
}
