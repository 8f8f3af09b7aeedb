// Package openapi serves the Cloud API's OpenAPI 3.1 document at
// GET /api/v1/openapi.json. The document is written by hand in
// openapi.json and embedded: the routes are spread over several packages
// with their shapes in handler structs, and a generated document would
// need annotations in all of them. Instead, roles/api's
// TestOpenAPIMatchesRouter compares the document with the router New
// builds, so a route added without being documented (or documented
// without existing) fails the build, and this package's tests check the
// document's own consistency (unique operation ids, resolvable $refs,
// declared path parameters).
package openapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// Path is where Register serves the document.
const Path = "/api/v1/openapi.json"

//go:embed openapi.json
var document []byte

// etag is computed once: the document cannot change while the process
// runs, so clients revalidate with If-None-Match for the cost of a
// header compare.
var etag = func() string {
	sum := sha256.Sum256(document)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// Document returns a copy of the embedded document, so a caller cannot
// change what the route serves.
func Document() []byte { return bytes.Clone(document) }

// Register adds GET Path to r. The route needs no credential: the
// document describes the API's shape, not any tenant's data.
func Register(r gin.IRoutes) {
	r.GET(Path, serve)
}

func serve(c *gin.Context) {
	c.Header("ETag", etag)
	// no-cache makes caches revalidate, which the ETag makes cheap; a new
	// build may describe a changed API under the same URL.
	c.Header("Cache-Control", "no-cache")
	if matches(c.GetHeader("If-None-Match"), etag) {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, "application/json", document)
}

// matches implements If-None-Match's weak comparison over a list of tags.
func matches(header, tag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == tag {
			return true
		}
	}
	return false
}
