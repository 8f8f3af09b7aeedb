package db

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestIsDataError(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "22021"}, true}, // invalid byte sequence
		{&pgconn.PgError{Code: "23502"}, true}, // not null violation
		{fmt.Errorf("insert readings: %w", &pgconn.PgError{Code: "22P02"}), true},
		{&pgconn.PgError{Code: "57P01"}, false}, // admin shutdown
		{&pgconn.PgError{Code: "42P01"}, false}, // table missing: the backend's problem
		{&pgconn.PgError{Code: "53100"}, false}, // disk full
		{errors.New("connection refused"), false},
		{context.DeadlineExceeded, false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := IsDataError(tt.err); got != tt.want {
			t.Errorf("IsDataError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestIsUniqueViolation(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "23505"}, true},
		{fmt.Errorf("create user: %w", &pgconn.PgError{Code: "23505"}), true},
		{&pgconn.PgError{Code: "23503"}, false}, // foreign key
		{errors.New("UNIQUE constraint failed"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := IsUniqueViolation(tt.err); got != tt.want {
			t.Errorf("IsUniqueViolation(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
