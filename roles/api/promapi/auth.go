package promapi

import (
	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// BasicAPIKey lets an API key arrive as the password of HTTP basic
// authentication, the form Grafana's Prometheus data source and
// promtool's user:key@host URLs send: it becomes the Bearer credential
// the API's authentication reads, so the key is checked, counted and
// scoped exactly as a Bearer one. The user name is ignored. Anything else
// (an account password, a request that already carries a Bearer token)
// is left alone, so an account password never authenticates here.
func BasicAPIKey(c *gin.Context) {
	if _, key, ok := c.Request.BasicAuth(); ok && accounts.IsAPIKey(key) {
		c.Request.Header.Set("Authorization", "Bearer "+key)
	}
	c.Next()
}
