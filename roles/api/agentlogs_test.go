package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// TestAgentLogsRouteIntegration: GET /agents/:uuid/logs pages through the
// agent's lines newest first with a cursor that visits every line once,
// filters by minimum level, time range (RFC 3339 and Unix ms) and text
// (case-insensitive, % and _ literal), refuses bad parameters with 400,
// and answers 404 to another tenant.
func TestAgentLogsRouteIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _ := fullEngine(t, d, testLicence(t, 0))
		tokA := admin(t, e)
		created := call(t, e, "POST", "/api/v1/agents", tokA, map[string]any{"name": "press"})
		if created.status != http.StatusCreated {
			t.Fatalf("create agent: %d %s", created.status, created.raw)
		}
		agent := created.str("uuid")
		other := call(t, e, "POST", "/api/v1/agents", tokA, map[string]any{"name": "other"}).str("uuid")
		tenantUUID, err := codec.ParseUUID(call(t, e, "GET", "/api/v1/auth/me", tokA, nil).str("tenantId"))
		if err != nil {
			t.Fatal(err)
		}
		tenant := codec.EncodeID(tenantUUID)
		tokB := call(t, e, "POST", "/api/v1/auth/register", "", map[string]string{"email": "b@example.com", "password": "correct horse battery"}).str("accessToken")

		// 250 lines a second apart, two of them at the same instant, and a
		// line of another agent.
		base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
		levels := []string{"debug", "info", "warn", "error", "info"}
		dl := d.Dialect()
		insert := func(agent string, i int, at time.Time, level, msg string) {
			t.Helper()
			if _, err := d.SQL().ExecContext(t.Context(), `INSERT INTO agent_logs (tenant_id, agent_uuid, time, level, message, component, source, data, entry_id, line)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, tenant, agent, dl.TimeArg(at), level, msg, "agent", "system", nil, "1-"+strconv.Itoa(i), i); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 250 {
			at := base.Add(time.Duration(i) * time.Second)
			if i == 101 {
				at = base.Add(100 * time.Second)
			}
			msg := fmt.Sprintf("line %d", i)
			if i%50 == 7 {
				msg = fmt.Sprintf("Pump PRESSURE 100%% high %d", i)
			}
			insert(agent, i, at, levels[i%len(levels)], msg)
		}
		insert(other, 999, base, "error", "another agent's line")

		get := func(tok, query string) reply {
			return call(t, e, "GET", "/api/v1/agents/"+agent+"/logs"+query, tok, nil)
		}
		lines := func(r reply) []map[string]any {
			t.Helper()
			if r.status != http.StatusOK {
				t.Fatalf("logs: %d %s", r.status, r.raw)
			}
			raw, _ := r.body["logs"].([]any)
			out := make([]map[string]any, len(raw))
			for i, l := range raw {
				out[i] = l.(map[string]any)
			}
			return out
		}

		// Default page: 100 lines, newest first, a cursor.
		first := get(tokA, "")
		if got := lines(first); len(got) != 100 || got[0]["message"] != "line 249" || first.body["nextCursor"] == nil {
			t.Fatalf("first page: %d lines, first %v, cursor %v", len(got), got[0], first.body["nextCursor"])
		}
		// Paging with limit 7 visits every line once, in order.
		seen := map[float64]bool{}
		var prev string
		cursor := ""
		pages := 0
		for {
			r := get(tokA, "?limit=7"+cursor)
			for _, l := range lines(r) {
				id := l["id"].(float64)
				if seen[id] {
					t.Fatalf("line %v twice", l)
				}
				seen[id] = true
				ts := l["timestamp"].(string)
				if prev != "" && ts > prev {
					t.Fatalf("line %v after a line at %s: not newest first", l, prev)
				}
				prev = ts
				if strings.Contains(l["message"].(string), "another agent") {
					t.Fatalf("another agent's line: %v", l)
				}
			}
			pages++
			next, _ := r.body["nextCursor"].(string)
			if next == "" {
				break
			}
			cursor = "&cursor=" + url.QueryEscape(next)
		}
		if len(seen) != 250 || pages != 36 {
			t.Fatalf("paging saw %d lines in %d pages, want 250 in 36", len(seen), pages)
		}

		// Minimum level.
		for _, l := range lines(get(tokA, "?level=warn&limit=1000")) {
			if l["level"] != "warn" && l["level"] != "error" {
				t.Fatalf("level=warn gave %v", l)
			}
		}
		if n := len(lines(get(tokA, "?level=WARN&limit=1000"))); n != 100 {
			t.Fatalf("level=warn: %d lines, want 100", n)
		}
		// Time range: since inclusive, until exclusive, in both forms.
		since := base.Add(10 * time.Second)
		until := base.Add(20 * time.Second)
		for _, q := range []string{
			"?since=" + since.Format(time.RFC3339) + "&until=" + until.Format(time.RFC3339),
			"?since=" + strconv.FormatInt(since.UnixMilli(), 10) + "&until=" + strconv.FormatInt(until.UnixMilli(), 10),
		} {
			got := lines(get(tokA, q))
			if len(got) != 10 || got[0]["message"] != "line 19" || got[9]["message"] != "line 10" {
				t.Fatalf("%s: %d lines %v", q, len(got), got)
			}
		}
		// Text: case-insensitive, with a literal %.
		got := lines(get(tokA, "?q="+url.QueryEscape("pressure 100%")))
		if len(got) != 5 {
			t.Fatalf("q: %d lines %v, want 5", len(got), got)
		}
		if got := lines(get(tokA, "?q="+url.QueryEscape("line _"))); len(got) != 0 {
			t.Fatalf("q with _ matched %d lines: _ must be literal", len(got))
		}

		for _, bad := range []string{"?level=loud", "?since=yesterday", "?limit=0", "?limit=1001", "?cursor=nope",
			"?since=2026-11-29T10:00:00Z&until=2026-11-29T09:00:00Z", "?q=" + strings.Repeat("x", 201)} {
			if r := get(tokA, bad); r.status != http.StatusBadRequest || r.str("error", "code") != "invalid_parameter" {
				t.Errorf("GET logs%s = %d %s, want 400 invalid_parameter", bad, r.status, r.raw)
			}
		}
		if r := get(tokB, ""); r.status != http.StatusNotFound {
			t.Fatalf("tenant B: %d %s, want 404", r.status, r.raw)
		}
		if r := call(t, e, "GET", "/api/v1/agents/not-a-uuid/logs", tokA, nil); r.status != http.StatusBadRequest {
			t.Fatalf("bad uuid: %d %s", r.status, r.raw)
		}
	})
}
