package readings

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// maxInsertReadings bounds one POST /readings: it exists for tests and
// demos, and ingest is the way to write in bulk.
const maxInsertReadings = 1000

// newReading is one element of a POST /readings body.
type newReading struct {
	AgentUUID  string `json:"agentUuid"`
	MetricName string `json:"metricName"`
	// Value is a number, or null for a reading without one (a failed
	// read); it must be present so that a forgotten value is not stored
	// as a failed read.
	Value json.RawMessage `json:"value"`
	// Time is RFC 3339 or Unix milliseconds; now when absent.
	Time       json.RawMessage `json:"time"`
	Unit       string          `json:"unit"`
	Quality    string          `json:"quality"`
	Protocol   string          `json:"protocol"`
	DeviceName string          `json:"deviceName"`
}

// row is a checked reading, ready for insertSQL.
type row struct {
	time                                time.Time
	agent, metric                       string
	value                               any // float64 or nil
	unit, quality, protocol, deviceName string
}

// insert is POST /readings: one reading, or an array of them, written with
// the caller's tenant. Readings whose key (agent, metric, time) is already
// stored are ignored, as ingest ignores resent samples.
func (h *handler) insert(c *gin.Context) {
	tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	body, ok := h.readBody(c)
	if !ok {
		return
	}
	var in []newReading
	first := bytes.TrimSpace(body)[0]
	if first != '{' && first != '[' {
		h.WriteError(c, http.StatusBadRequest, "invalid_body", "body: must be a JSON object (one reading) or an array of readings")
		return
	}
	single := first == '{'
	var err error
	if single {
		in = make([]newReading, 1)
		err = decodeStrict(body, &in[0])
	} else {
		err = decodeStrict(body, &in)
	}
	if err != nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_body", err.Error())
		return
	}
	switch {
	case len(in) == 0:
		h.WriteError(c, http.StatusBadRequest, "invalid_body", "body: the array holds no readings")
		return
	case len(in) > maxInsertReadings:
		h.WriteError(c, http.StatusBadRequest, "invalid_body",
			fmt.Sprintf("body: %d readings exceed the limit of %d per request", len(in), maxInsertReadings))
		return
	}
	now := h.Now().UTC().Truncate(time.Microsecond)
	rows := make([]row, len(in))
	for i := range in {
		prefix := ""
		if !single {
			prefix = fmt.Sprintf("readings[%d].", i)
		}
		if rows[i], err = checkReading(prefix, &in[i], now); err != nil {
			h.fail(c, "insert", err)
			return
		}
	}
	d := h.DB
	if !h.registered(c, rows, single) {
		return
	}
	skews, ok := h.inClockWindow(c, tenant, rows, single, now)
	if !ok {
		return
	}
	inserted, err := write(c.Request.Context(), d, tenant, rows)
	if err != nil {
		h.fail(c, "insert", err)
		return
	}
	// Counted only once stored: a client retrying a failed insert would
	// otherwise count the same past readings once per attempt.
	h.reportSkew(tenant, skews, now)
	c.JSON(http.StatusCreated, gin.H{"inserted": inserted, "ignored": len(rows) - inserted})
}

func checkReading(prefix string, r *newReading, now time.Time) (row, error) {
	var out row
	var err error
	if r.AgentUUID == "" {
		return out, badParam(prefix+"agentUuid", "is required")
	}
	if out.agent, err = parseAgent(prefix+"agentUuid", r.AgentUUID); err != nil {
		return out, err
	}
	if r.MetricName == "" {
		return out, badParam(prefix+"metricName", "is required")
	}
	if err := checkText(prefix+"metricName", r.MetricName, maxNameBytes); err != nil {
		return out, err
	}
	out.metric, out.deviceName = r.MetricName, r.DeviceName
	// Ingest names metrics "<deviceName>.<reading name>"; keep manual
	// readings findable the same way.
	if out.deviceName == "" {
		out.deviceName, _, _ = strings.Cut(r.MetricName, ".")
	}
	if rest, ok := strings.CutPrefix(r.MetricName, out.deviceName+"."); !ok || rest == "" || out.deviceName == "" {
		if r.DeviceName != "" {
			return out, badParam(prefix+"metricName", "must be %s followed by a reading name, as ingest names metrics, got %s",
				quote(r.DeviceName+"."), quote(r.MetricName))
		}
		return out, badParam(prefix+"metricName", "must be <deviceName>.<reading name>, as in boiler.temp, got %s", quote(r.MetricName))
	}
	switch s := string(bytes.TrimSpace(r.Value)); {
	case s == "":
		return out, badParam(prefix+"value", "is required: a number, or null for a reading without a value")
	case s == "null":
	default:
		var v float64
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return out, badParam(prefix+"value", "must be a number or null, got %s", quote(s))
		}
		out.value = v
	}
	out.time = now
	if t, ok, err := parseJSONTime(prefix+"time", r.Time); err != nil {
		return out, err
	} else if ok {
		out.time = t
	}
	for _, a := range []struct{ name, v string }{
		{"deviceName", r.DeviceName}, {"unit", r.Unit}, {"quality", r.Quality}, {"protocol", r.Protocol},
	} {
		if err := checkText(prefix+a.name, a.v, maxAttrBytes); err != nil {
			return out, err
		}
	}
	out.unit, out.quality, out.protocol = r.Unit, r.Quality, r.Protocol
	return out, nil
}

// registered answers 404 and returns false unless every agent rows name is
// in the caller's tenant's registry. Another tenant's agent and an agent
// nobody registered get the same answer, as on the routes that name an
// agent, so the refusal tells nothing about other tenants.
func (h *handler) registered(c *gin.Context, rows []row, single bool) bool {
	agents := make([]string, 0, len(rows))
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.agent] {
			seen[r.agent] = true
			agents = append(agents, r.agent)
		}
	}
	owned, err := h.AgentRegistered(c, agents)
	if err != nil {
		h.fail(c, "check agent registry", fmt.Errorf("agent registry: %w", err))
		return false
	}
	for i, r := range rows {
		if owned[r.agent] {
			continue
		}
		name := "agentUuid"
		if !single {
			name = fmt.Sprintf("readings[%d].agentUuid", i)
		}
		h.WriteError(c, http.StatusNotFound, "not_found", name+" "+quote(r.agent)+" is not an agent of this tenant; register it first")
		return false
	}
	return true
}

// inClockWindow holds the readings' times to Deps.Clock around now, their
// receive time. It answers 422 naming the first reading too far ahead,
// reports the refused future readings to Deps.ClockSkew and returns false;
// otherwise it returns the past readings by agent, for the caller to
// report once they are stored. A reading without a time was given now and
// cannot be skewed.
func (h *handler) inClockWindow(c *gin.Context, tenant string, rows []row, single bool, now time.Time) (map[string]*envelope.Skew, bool) {
	skews := map[string]*envelope.Skew{}
	first := -1
	for i, r := range rows {
		dir := h.Clock.Check(r.time, now)
		if dir == 0 {
			continue
		}
		s := skews[r.agent]
		if s == nil {
			s = &envelope.Skew{}
			skews[r.agent] = s
		}
		if dir > 0 {
			s.Future++
			s.Ahead = max(s.Ahead, r.time.Sub(now))
			if first < 0 {
				first = i
			}
		} else {
			s.Past++
			s.Behind = max(s.Behind, now.Sub(r.time))
		}
	}
	if first < 0 {
		return skews, true
	}
	// The whole body is refused: its past readings were not accepted and
	// are not counted as such.
	for _, s := range skews {
		s.Past, s.Behind = 0, 0
	}
	h.reportSkew(tenant, skews, now)
	name := "time"
	if !single {
		name = fmt.Sprintf("readings[%d].time", first)
	}
	h.WriteError(c, http.StatusUnprocessableEntity, "validation_failed", fmt.Sprintf(
		"%s %s is %s ahead of the server's clock, more than the %s accepted (api.clock_max_future); check the agent's clock",
		name, formatTime(rows[first].time), formatSpan(rows[first].time.Sub(now).Round(time.Second)), formatSpan(h.Clock.MaxFuture)))
	return nil, false
}

// reportSkew passes each agent's skewed readings to Deps.ClockSkew.
func (h *handler) reportSkew(tenant string, skews map[string]*envelope.Skew, now time.Time) {
	if h.ClockSkew == nil {
		return
	}
	for agent, s := range skews {
		if s.Any() {
			h.ClockSkew(tenant, agent, *s, now)
		}
	}
}

// write inserts rows in one transaction and returns how many were new.
// The caller has checked that the tenant owns every agent named.
func write(ctx context.Context, d *db.DB, tenant string, rows []row) (int, error) {
	tx, err := d.SQL().BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin insert: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	stmt, err := tx.PrepareContext(ctx, insertSQL)
	if err != nil {
		return 0, fmt.Errorf("prepare insert: %w", err)
	}
	defer stmt.Close()
	dl := d.Dialect()
	inserted := 0
	for _, r := range rows {
		res, err := stmt.ExecContext(ctx, dl.TimeArg(r.time), r.agent, r.metric, r.value,
			nullable(r.protocol), nullable(r.unit), nullable(r.quality), nullable(r.deviceName), tenant)
		if err != nil {
			return 0, fmt.Errorf("insert reading: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("insert reading: %w", err)
		}
		inserted += int(n)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit insert: %w", err)
	}
	return inserted, nil
}

// nullable stores "" as NULL, as ingest does for a missing attribute.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
