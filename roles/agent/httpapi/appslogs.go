package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// Limits of the service log stream's ?tail=.
const (
	defaultLogTail = 200
	maxLogTail     = 2000
)

// sseHeartbeat is how often a following log stream sends a comment, so
// proxies and browsers keep a quiet stream open and a client that left is
// noticed. A variable for tests.
var sseHeartbeat = 15 * time.Second

// sseWriteTimeout bounds each write: a client that stops reading must not
// hold the handler for as long as its socket buffers stay full (the
// server has no write timeout, streams being long).
const sseWriteTimeout = 10 * time.Second

// logQuery parses the stream's query strictly: a value that is not
// understood is a 400 naming its key, not a default.
func logQuery(c *gin.Context) (LogOptions, bool) {
	o := LogOptions{Tail: defaultLogTail, Timestamps: true}
	if s, set := c.GetQuery("tail"); set {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > maxLogTail {
			fail(c, http.StatusBadRequest, "tail: must be an integer 0..%d, got %q", maxLogTail, clipParam(s))
			return o, false
		}
		o.Tail = n
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{{"follow", &o.Follow}, {"timestamps", &o.Timestamps}} {
		s, set := c.GetQuery(b.key)
		if !set {
			continue
		}
		switch s {
		case "true", "1":
			*b.dst = true
		case "false", "0":
			*b.dst = false
		default:
			fail(c, http.StatusBadRequest, "%s: must be true or false, got %q", b.key, clipParam(s))
			return o, false
		}
	}
	return o, true
}

// logs streams a service's container log as Server-Sent Events, each
// event's data {"msg","stream"}. What can fail before the stream starts
// (bad query, unknown app or service, runtime down) answers with a status;
// a failure once it runs is an "error" event, then the end.
func (r appRoutes) logs(c *gin.Context) {
	id, ok := appID(c)
	if !ok {
		return
	}
	name := c.Param("serviceName")
	opts, ok := logQuery(c)
	if !ok {
		return
	}
	st, err := r.Apps.State(c.Request.Context())
	if err != nil {
		r.appFailed(c, "read app", id, name, err)
		return
	}
	app, found := findApp(st, id)
	if !found {
		fail(c, http.StatusNotFound, "app %d not found", id)
		return
	}
	known := false
	for _, s := range app.Services {
		known = known || s.ServiceName == name
	}
	if !known {
		fail(c, http.StatusNotFound, "app %d has no service %q", id, name)
		return
	}
	if st.Runtime.Status != "connected" {
		msg := ErrRuntimeDown.Error() + " (" + st.Runtime.Status + ")"
		if st.Runtime.Error != "" {
			msg += ": " + st.Runtime.Error
		}
		fail(c, http.StatusServiceUnavailable, "%s", msg)
		return
	}
	releaseStore(c)

	ctx, cancel := context.WithCancel(c.Request.Context())
	defer cancel()
	sw := &sseWriter{w: c.Writer, rc: http.NewResponseController(c.Writer)}
	defer func() { _ = sw.rc.SetWriteDeadline(time.Time{}) }()
	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	// nginx buffers responses unless told not to, which would hold lines.
	h.Set("X-Accel-Buffering", "no")
	c.Writer.WriteHeader(http.StatusOK)
	if sw.write(": connected\nretry: 3000\n\n") != nil {
		return
	}
	var wg sync.WaitGroup
	if opts.Follow {
		wg.Go(func() {
			t := time.NewTicker(sseHeartbeat)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if sw.write(": keepalive\n\n") != nil {
						cancel()
						return
					}
				}
			}
		})
	}
	err = r.Apps.Logs(ctx, id, name, opts, func(l LogLine) error {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		return sw.write("data: " + string(b) + "\n\n")
	})
	cancel()
	wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) && c.Request.Context().Err() == nil && !sw.failed() {
		if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrRuntimeDown) {
			r.Log.Warn("service log stream", "err", err, "app_id", id, "service", name)
		}
		b, _ := json.Marshal(gin.H{"error": err.Error()})
		_ = sw.write("event: error\ndata: " + string(b) + "\n\n")
	}
}

// sseWriter serialises the writes of the log lines and the heartbeat,
// each flushed at once under its own deadline.
type sseWriter struct {
	mu  sync.Mutex
	w   gin.ResponseWriter
	rc  *http.ResponseController
	err error
}

func (s *sseWriter) write(frame string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	// Not every writer supports deadlines (a test recorder); the write
	// itself still fails on a gone client.
	_ = s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if _, err := s.w.WriteString(frame); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return err
	}
	return nil
}

func (s *sseWriter) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}
