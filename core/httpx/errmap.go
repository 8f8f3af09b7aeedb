package httpx

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
)

// ErrorCase answers the errors that are (errors.Is) one of Errs with
// Status and Code. The message is the error's own text, so the errors a
// table names must be worded for clients.
type ErrorCase struct {
	Errs   []error
	Status int
	Code   string
}

// Case is the ErrorCase of errs.
func Case(status int, code string, errs ...error) ErrorCase {
	return ErrorCase{Errs: errs, Status: status, Code: code}
}

// CodedError is an error that names its own answer, such as a licence
// refusal: a package that meets one need not know its kind.
type CodedError interface {
	error
	HTTPStatus() int
	ErrorCode() string
}

// ErrorMap answers the errors of one package of routes in the role's
// shape. The package keeps its own sentinel errors and hands over their
// table, instead of a switch of its own that repeats the fall-backs.
type ErrorMap struct {
	write  ErrorWriter
	log    *slog.Logger
	failed string
	cases  []ErrorCase
}

// NewErrorMap returns the map of cases, tried in order. failed is the log
// message of an error no case matches ("jobs request failed"); log nil
// logs nothing.
func NewErrorMap(write ErrorWriter, log *slog.Logger, failed string, cases ...ErrorCase) *ErrorMap {
	if write == nil {
		panic("BUG: httpx.NewErrorMap without an error writer")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ErrorMap{write: write, log: log, failed: failed, cases: cases}
}

// Fail answers err: a CodedError with its own status and code; an error
// of a case with the case's; nothing for a cancelled request, whose
// client has left; anything else is a bug or an outage, logged and
// answered 500 internal without its detail.
func (m *ErrorMap) Fail(c *gin.Context, err error) {
	var ce CodedError
	if errors.As(err, &ce) {
		m.write(c, ce.HTTPStatus(), ce.ErrorCode(), ce.Error())
		return
	}
	for _, k := range m.cases {
		for _, target := range k.Errs {
			if errors.Is(err, target) {
				m.write(c, k.Status, k.Code, err.Error())
				return
			}
		}
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	m.log.Error(m.failed, "path", c.FullPath(), "err", err)
	m.write(c, http.StatusInternalServerError, "internal", "internal error")
}
