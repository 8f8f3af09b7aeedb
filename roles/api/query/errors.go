package query

import (
	"fmt"
	"unicode/utf8"
)

// ParseError is a syntax or validation error in the query text, with the
// position it was found at. The HTTP handler answers it with 400.
type ParseError struct {
	// Offset is the byte offset into the query, 0-based.
	Offset int
	// Line and Column are 1-based; Column counts characters (runes).
	Line, Column int
	// Msg says what is wrong, without the position.
	Msg string
}

// Error returns "parse error at line L, column C: msg".
func (e *ParseError) Error() string {
	return fmt.Sprintf("parse error at line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// newParseError locates offset in src.
func newParseError(src string, offset int, format string, args ...any) *ParseError {
	if offset > len(src) {
		offset = len(src)
	}
	line, col := 1, 1
	for i := 0; i < offset; {
		r, n := utf8.DecodeRuneInString(src[i:])
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += n
	}
	return &ParseError{Offset: offset, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// LimitError says which limit a query exceeds and by how much. The HTTP
// handler answers it with 422.
type LimitError struct {
	// Limit is the Limits field's key: max_query_bytes, max_depth,
	// min_step, max_range, max_series, max_points_per_series or max_rows;
	// or regex_complexity when PostgreSQL finds a regular expression too
	// complex to run.
	Limit string
	// Value is what the query asked for, Max the limit, both formatted
	// for people ("2160h0m0s", "more than 500").
	Value, Max string
	msg        string
}

// Error names the limit, the value and the limit's value.
func (e *LimitError) Error() string { return e.msg }

func limitError(limit, what, value, max, hint string) *LimitError {
	msg := fmt.Sprintf("%s %s exceeds the limit of %s (%s)", what, value, max, limit)
	if limit == "min_step" {
		msg = fmt.Sprintf("%s %s is below the minimum of %s (%s)", what, value, max, limit)
	}
	if hint != "" {
		msg += ": " + hint
	}
	return &LimitError{Limit: limit, Value: value, Max: max, msg: msg}
}

// ParamError is an invalid request parameter outside the query text: the
// time range or the step. Param names it ("start", "end", "step") so the
// handler can say which one is wrong; it answers with 400.
type ParamError struct {
	Param string
	Msg   string
}

// Error returns "invalid <param>: <msg>".
func (e *ParamError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Param, e.Msg) }
