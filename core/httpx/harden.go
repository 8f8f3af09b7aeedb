package httpx

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// DefaultBodyTimeout bounds how long a request body may take to arrive when
// a role sets none: far above what any legitimate body needs, far below
// the minutes a trickled body used to hold a connection and a goroutine.
const DefaultBodyTimeout = 30 * time.Second

// SecurityHeaders are sent on every answer of every role. The roles serve
// JSON, never pages meant to be framed or sniffed as HTML, so the strict
// values cost nothing; frame denial is given twice because older browsers
// know only X-Frame-Options and newer ones prefer the CSP directive.
var SecurityHeaders = map[string]string{
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
	"Content-Security-Policy": "frame-ancestors 'none'",
}

func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	for k, v := range SecurityHeaders {
		h.Set(k, v)
	}
	c.Next()
}

// bodyDeadline gives a request's body d to arrive, from the end of its
// headers. It is a read deadline on the connection, set only while a body
// is being read, rather than http.Server.ReadTimeout: that one stays armed
// for the whole request, and the server's background read that watches
// for a client hanging up would hit it and cancel long answers, such as
// the live Server-Sent Events stream, which has no body to wait for.
func bodyDeadline(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		if d <= 0 || c.Request.Body == nil || c.Request.Body == http.NoBody || c.Request.ContentLength == 0 {
			c.Next()
			return
		}
		rc := http.NewResponseController(c.Writer)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			// No connection to set it on (a test recorder).
			c.Next()
			return
		}
		body := &deadlineBody{ReadCloser: c.Request.Body, rc: rc}
		c.Request.Body = body
		c.Next()
		body.clear()
	}
}

// deadlineBody lifts the read deadline once the body is read to its end
// (or fails), so it cannot fire later, while the handler works, and cancel
// the request through the server's background read.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.clear()
	}
	return n, err
}

func (b *deadlineBody) clear() {
	b.once.Do(func() { _ = b.rc.SetReadDeadline(time.Time{}) })
}

// IsBodyTimeout reports whether err came from a request body that did not
// arrive within the engine's body timeout, so handlers answer 408.
func IsBodyTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// StatusClientClosedRequest is nginx's status for a request whose client
// went away before the answer. No client ever sees it; logs and metrics
// do, so a client hanging up is not taken for a server failure.
const StatusClientClosedRequest = 499

// ClientGone reports whether the client of c has gone away: its request's
// context is cancelled while the handler still runs. A database call
// failing then failed because of that, not because the database did.
func ClientGone(c *gin.Context) bool {
	return errors.Is(c.Request.Context().Err(), context.Canceled)
}

// outcomeStatus is the status that logs and metrics record: a server error
// answered to a client that had gone, or no answer at all because it had,
// is recorded as 499, whichever handler wrote it (or did not).
func outcomeStatus(c *gin.Context) int {
	status := c.Writer.Status()
	if (status >= 500 || !c.Writer.Written()) && ClientGone(c) {
		return StatusClientClosedRequest
	}
	return status
}
