package httpx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

type refusal struct{ code, msg string }

func (r *refusal) Error() string     { return r.msg }
func (r *refusal) HTTPStatus() int   { return http.StatusForbidden }
func (r *refusal) ErrorCode() string { return r.code }

func TestErrorMapAnswers(t *testing.T) {
	errInvalid := errors.New("validation failed")
	errWeak := errors.New("weak password")
	errConflict := errors.New("conflict")
	errTaken := fmt.Errorf("%w: taken", errConflict)
	tests := []struct {
		name   string
		err    error
		status int
		body   string
		logged bool
	}{
		{"first case", fmt.Errorf("%w: name: is required", errInvalid), 422, `{"code":"validation_failed","message":"validation failed: name: is required"}`, false},
		{"second error of a case", errWeak, 422, `{"code":"validation_failed","message":"weak password"}`, false},
		// errTaken is an errConflict too: the earlier case wins.
		{"cases in order", fmt.Errorf("save: %w", errTaken), 409, `{"code":"taken","message":"save: conflict: taken"}`, false},
		{"coded error", fmt.Errorf("check: %w", &refusal{"licence_feature_missing", "no such feature"}), 403,
			`{"code":"licence_feature_missing","message":"no such feature"}`, false},
		{"cancelled", fmt.Errorf("query: %w", context.Canceled), 200, ``, false},
		{"unexpected", errors.New("connection refused by 10.0.0.7"), 500, `{"code":"internal","message":"internal error"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			m := NewErrorMap(writeTestError, slog.New(slog.NewTextHandler(&logs, nil)), "things request failed",
				Case(http.StatusUnprocessableEntity, "validation_failed", errInvalid, errWeak),
				Case(http.StatusConflict, "taken", errTaken),
				Case(http.StatusConflict, "conflict", errConflict))
			e := gin.New()
			e.GET("/things/:id", func(c *gin.Context) { m.Fail(c, tt.err) })
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest("GET", "/things/7", nil))
			if rec.Code != tt.status || rec.Body.String() != tt.body {
				t.Errorf("answer %d %s, want %d %s", rec.Code, rec.Body, tt.status, tt.body)
			}
			logged := strings.Contains(logs.String(), "things request failed")
			if logged != tt.logged {
				t.Errorf("logged %v, want %v: %q", logged, tt.logged, logs.String())
			}
			if tt.logged && (!strings.Contains(logs.String(), "path=/things/:id") || !strings.Contains(logs.String(), "10.0.0.7")) {
				t.Errorf("log line %q lacks the route or the error", logs.String())
			}
		})
	}
}

func TestErrorMapWithoutLogger(t *testing.T) {
	m := NewErrorMap(writeTestError, nil, "things request failed")
	e := gin.New()
	e.GET("/", func(c *gin.Context) { m.Fail(c, errors.New("boom")) })
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("status %d, want 500", rec.Code)
	}
}
