package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// ReadBody reads the request body up to max bytes, or answers 413, 408
// (the body timeout, closing the connection) or 400 through write and
// returns false. An empty body is refused.
func ReadBody(c *gin.Context, max int64, write ErrorWriter) ([]byte, bool) {
	body, ok := ReadBodyAllowEmpty(c, max, write)
	if ok && len(bytes.TrimSpace(body)) == 0 {
		write(c, http.StatusBadRequest, "invalid_body", "the request body is empty; send a JSON document")
		return nil, false
	}
	return body, ok
}

// ReadBodyAllowEmpty is ReadBody for routes whose body is optional, or not
// JSON: it answers the same 413, 408 and 400 for a body too large, too
// slow or unreadable, and returns an empty body as it is.
func ReadBodyAllowEmpty(c *gin.Context, max int64, write ErrorWriter) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, max))
	switch {
	case IsBodyTooLarge(err):
		write(c, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body over %d bytes", max))
		return nil, false
	case IsBodyTimeout(err):
		c.Header("Connection", "close")
		write(c, http.StatusRequestTimeout, "request_timeout", "the request body did not arrive in time")
		return nil, false
	case err != nil:
		write(c, http.StatusBadRequest, "invalid_body", "cannot read the request body")
		return nil, false
	}
	return body, true
}

// BindStrict reads a JSON body of at most max bytes into dst with
// DecodeStrict, or answers 413 or 400 (naming the field at fault) and
// returns false.
func BindStrict(c *gin.Context, max int64, dst any, write ErrorWriter) bool {
	body, ok := ReadBody(c, max, write)
	if !ok {
		return false
	}
	if err := DecodeStrict(body, dst); err != nil {
		write(c, http.StatusBadRequest, "invalid_body", err.Error())
		return false
	}
	return true
}

// DecodeStrict decodes exactly one JSON value from body into dst, refusing
// fields dst does not have: a misspelt field would otherwise be dropped
// without a word. A string (key or value, at any depth) holding U+0000 is
// refused too, naming its path, as no store of ours can keep it. Its errors
// are worded for API clients.
func DecodeStrict(body []byte, dst any) error {
	if err := checkNUL(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("body: unexpected data after the JSON document")
	}
	return nil
}

// bodyError rewords encoding/json's errors for API clients.
func bodyError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("body: invalid JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Errorf("body: expected %s, got a JSON %s", jsonKind(typ.Type.Kind().String()), typ.Value)
		}
		return fmt.Errorf("body: %s must be %s, got a JSON %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("body: the JSON document is cut short")
	}
	return fmt.Errorf("body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "float64", "float32", "int", "int64":
		return "a number"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return goKind
}
