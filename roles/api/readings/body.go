package readings

import (
	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/httpx"
)

// maxBodyBytes caps the bodies this package reads, below the engine's own
// cap: a query or a batch of test readings is small.
const maxBodyBytes = 1 << 20

// readBody reads the request body, or answers 413 or 400 and returns false.
func (h *handler) readBody(c *gin.Context) ([]byte, bool) {
	return httpx.ReadBody(c, maxBodyBytes, h.WriteError)
}

// decodeStrict decodes body into dst, refusing unknown fields.
func decodeStrict(body []byte, dst any) error { return httpx.DecodeStrict(body, dst) }
