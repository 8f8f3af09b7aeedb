package db

import (
	"strconv"
	"strings"
)

// SQLBuilder collects SQL text and its arguments. Values enter only through
// Arg, as $n placeholders, so a builder whose text comes from constants
// never carries input as SQL text; $n works on PostgreSQL and SQLite alike.
type SQLBuilder struct {
	b    strings.Builder
	args []any
}

// Arg appends v to the arguments and returns its placeholder.
func (s *SQLBuilder) Arg(v any) string {
	s.args = append(s.args, v)
	return "$" + strconv.Itoa(len(s.args))
}

// Write appends SQL text.
func (s *SQLBuilder) Write(parts ...string) {
	for _, p := range parts {
		s.b.WriteString(p)
	}
}

// String returns the SQL text.
func (s *SQLBuilder) String() string { return s.b.String() }

// Args returns the arguments, in placeholder order.
func (s *SQLBuilder) Args() []any { return s.args }
