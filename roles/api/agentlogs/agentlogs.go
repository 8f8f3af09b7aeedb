// Package agentlogs is the Cloud API's GET /api/v1/agents/:uuid/logs: the
// log lines an agent shipped (POST /device/:uuid/logs, moved into
// agent_logs by the ingest role), newest first, filtered by level, time
// range and text, paged with an opaque cursor. The same SQL runs on
// PostgreSQL and SQLite. See docs/agents-api.md, section "GET
// /agents/:uuid/logs".
//
//	agentlogs.Register(v1, agentlogs.Deps{DB: b.DB, Tenant: tenantKey,
//		WriteError: WriteError, AgentGuard: acc.agentGuard("uuid")})
package agentlogs

import (
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
)

// Deps are what the route needs.
type Deps struct {
	// DB is the cloud database.
	DB *db.DB
	// Tenant returns the caller's tenant as agent_logs stores it; false
	// answers 401. The tenant never comes from the request.
	Tenant func(*gin.Context) (string, bool)
	// WriteError renders the API's error shape.
	WriteError httpx.ErrorWriter
	// AgentGuard, when set, runs first and answers 404 for an agent that
	// is not in the caller's tenant's registry, as the other agent routes
	// do.
	AgentGuard gin.HandlerFunc
	// Log receives database failures; discarded when nil.
	Log *slog.Logger
}

// Register mounts GET /agents/:uuid/logs on g.
func Register(g gin.IRoutes, d Deps) {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	h := &handler{d}
	if d.AgentGuard != nil {
		g.GET("/agents/:uuid/logs", d.AgentGuard, h.list)
		return
	}
	g.GET("/agents/:uuid/logs", h.list)
}

type handler struct{ Deps }

// Line is one log line of the answer.
type Line struct {
	ID        int64           `json:"id"`
	Timestamp string          `json:"timestamp"`
	Level     string          `json:"level"`
	Message   string          `json:"message"`
	Component string          `json:"component,omitempty"`
	Source    string          `json:"source,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

func (h *handler) list(c *gin.Context) {
	tenant, ok := h.Tenant(c)
	if !ok {
		h.WriteError(c, http.StatusUnauthorized, "unauthorized", "no tenant in the credential")
		return
	}
	u, err := codec.ParseUUID(c.Param("uuid"))
	if err != nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "uuid must be a hyphenated UUID, got "+quote(c.Param("uuid")))
		return
	}
	q, err := parseQuery(c.Query("level"), c.Query("since"), c.Query("until"), c.Query("q"), c.Query("limit"), c.Query("cursor"))
	if err != nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", err.Error())
		return
	}
	var s db.SQLBuilder
	buildSQL(&s, h.DB.Dialect(), tenant, u.String(), q)
	rows, err := h.DB.ReadSQL().QueryContext(c.Request.Context(), s.String(), s.Args()...)
	if err != nil {
		h.failed(c, err)
		return
	}
	defer rows.Close()
	lines := make([]Line, 0, q.limit)
	var next *string
	var lastAt time.Time
	for rows.Next() {
		var l Line
		var at db.Timestamp
		var level, message, component, source, data sql.NullString
		if err := rows.Scan(&l.ID, &at, &level, &message, &component, &source, &data); err != nil {
			h.failed(c, err)
			return
		}
		if len(lines) == q.limit {
			// The extra row only says there is a next page; the cursor
			// points after the last line returned.
			last := lines[len(lines)-1]
			cur := encodeCursor(cursor{lastAt.UnixMicro(), last.ID})
			next = &cur
			break
		}
		lastAt = at.Time
		l.Timestamp = at.Time.Format(timeLayout)
		l.Level, l.Message, l.Component, l.Source = level.String, message.String, component.String, source.String
		if data.Valid && data.String != "" {
			l.Data = json.RawMessage(data.String)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		h.failed(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"agentUuid": u.String(), "logs": lines, "nextCursor": next})
}

func (h *handler) failed(c *gin.Context, err error) {
	if c.Request.Context().Err() == nil {
		h.Log.Warn("read agent logs", "err", err)
	}
	h.WriteError(c, http.StatusServiceUnavailable, "database_unavailable", "the database did not answer")
}

// buildSQL writes the page query: newest first, ties broken by id, one
// row more than the limit to tell whether a next page exists.
func buildSQL(s *db.SQLBuilder, d db.Dialect, tenant, agent string, q query) {
	s.Write(`SELECT id, time, level, message, component, source, data FROM agent_logs WHERE tenant_id = `, s.Arg(tenant),
		` AND agent_uuid = `, s.Arg(agent))
	if len(q.levels) > 0 {
		s.Write(` AND level IN (`)
		for i, l := range q.levels {
			if i > 0 {
				s.Write(`, `)
			}
			s.Write(s.Arg(l))
		}
		s.Write(`)`)
	}
	if !q.since.IsZero() {
		s.Write(` AND time >= `, s.Arg(d.TimeArg(q.since)))
	}
	if !q.until.IsZero() {
		s.Write(` AND time < `, s.Arg(d.TimeArg(q.until)))
	}
	if q.text != "" {
		s.Write(` AND LOWER(message) LIKE `, s.Arg("%"+likeEscape(strings.ToLower(q.text))+"%"), ` ESCAPE '\'`)
	}
	if q.after != nil {
		at := d.TimeArg(timeOfMicros(q.after.at))
		s.Write(` AND (time < `, s.Arg(at), ` OR (time = `, s.Arg(at), ` AND id < `, s.Arg(q.after.id), `))`)
	}
	s.Write(` ORDER BY time DESC, id DESC LIMIT `, s.Arg(q.limit+1))
}

// likeEscape makes the search text match literally inside LIKE.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
