package logring

import (
	"errors"
	"strconv"
	"strings"
)

// ParamError reports an invalid query parameter; the HTTP layer answers
// it with 400 and Error() as the message.
type ParamError struct {
	Param string // level, source, since or limit
	Msg   string // the full message, naming the parameter
	Err   error  // underlying parse error, if any
}

func (e *ParamError) Error() string { return e.Msg }
func (e *ParamError) Unwrap() error { return e.Err }

// Messages of the ParamErrors.
const (
	msgLevel  = "level must be one of debug, info, warn, error"
	msgSource = "source must be one of system, container, manager"
	msgSince  = "since must be Unix milliseconds"
	msgLimit  = "limit must be 1..1000"
)

// ValidateFilter checks a Filter built by hand. A zero Limit is accepted
// and means DefaultLimit.
func ValidateFilter(f Filter) error {
	if f.Level != "" && levelRank(f.Level) < 0 {
		return &ParamError{Param: "level", Msg: msgLevel}
	}
	switch f.Source {
	case "", SourceSystem, SourceContainer, SourceManager:
	default:
		return &ParamError{Param: "source", Msg: msgSource}
	}
	if f.Since < 0 {
		return &ParamError{Param: "since", Msg: msgSince}
	}
	if f.Limit < 0 || f.Limit > MaxLimit {
		return &ParamError{Param: "limit", Msg: msgLimit}
	}
	return nil
}

// ParseFilter builds a Filter from the query parameters of GET /v1/logs.
// Empty strings mean "not given". Level and source are matched without
// regard to case; limit defaults to DefaultLimit, and an explicit limit
// outside 1..MaxLimit is rejected rather than silently capped so a client
// notices it asked for more than it can get.
func ParseFilter(level, source, since, limit string) (Filter, error) {
	f := Filter{
		Level:  strings.ToLower(strings.TrimSpace(level)),
		Source: strings.ToLower(strings.TrimSpace(source)),
		Limit:  DefaultLimit,
	}
	if s := strings.TrimSpace(since); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Filter{}, &ParamError{Param: "since", Msg: msgSince, Err: err}
		}
		f.Since = v
	}
	if s := strings.TrimSpace(limit); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			return Filter{}, &ParamError{Param: "limit", Msg: msgLimit, Err: err}
		}
		if v < 1 {
			return Filter{}, &ParamError{Param: "limit", Msg: msgLimit, Err: errors.New("below 1")}
		}
		f.Limit = v
	}
	// Returned unwrapped: its message goes to the client as it stands.
	if err := ValidateFilter(f); err != nil {
		return Filter{}, err
	}
	return f, nil
}
