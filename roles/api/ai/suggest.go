package ai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/anomaly"
	"github.com/edgeplat/edgeplat/roles/api/dashboards"
	"github.com/edgeplat/edgeplat/roles/api/readings"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// The rules of the deterministic proposal (docs/ai-assistant.md, section
// Dashboard suggestions).
const (
	// recentValues is how many of a metric's newest values its schema is
	// inferred from.
	recentValues = 100
	// seriesMinSamples is the history a numeric metric needs for a line
	// chart; one with less gets a gauge of its latest value.
	seriesMinSamples = 10
	// maxSuggestMetrics is how many metrics of the catalogue, in name
	// order, a proposal considers.
	maxSuggestMetrics = 40
	// maxSingleWidgets is how many metrics get a widget of their own; the
	// others go into a table per device.
	maxSingleWidgets = 12
)

// Kinds of metric the schema inference tells apart.
const (
	KindBoolean = "boolean"
	KindNumeric = "numeric"
	KindEmpty   = "empty"
)

// SuggestInput is the body of POST /dashboard/ai/suggestions.
type SuggestInput struct {
	DeviceUUID string `json:"deviceUuid"`
	// DeviceName keeps the metrics of one device of the agent.
	DeviceName string `json:"deviceName"`
}

// MetricSchema is what the proposal inferred of one metric, and which
// widget shows it.
type MetricSchema struct {
	Metric     string   `json:"metric"`
	DeviceName string   `json:"deviceName"`
	Unit       string   `json:"unit,omitempty"`
	Kind       string   `json:"kind"`
	Samples    int64    `json:"samples"`
	Min        *float64 `json:"min,omitempty"`
	Max        *float64 `json:"max,omitempty"`
	// Widget is the id of the widget that shows the metric; Skipped says
	// why none does.
	Widget  string `json:"widget,omitempty"`
	Skipped string `json:"skipped,omitempty"`
}

// Refinement tells what became of the model's pass over the proposal:
// off (no provider), applied, rejected (its layout broke the schema or
// named metrics the catalogue lacks) or failed (the provider erred).
type Refinement struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// Suggestion is the answer of POST /dashboard/ai/suggestions: a layout
// the dashboard layout routes accept as it is.
type Suggestion struct {
	DeviceUUID string            `json:"deviceUuid"`
	Source     string            `json:"source"`
	Layout     dashboards.Layout `json:"layout"`
	Metrics    []MetricSchema    `json:"metrics"`
	Refinement Refinement        `json:"refinement"`
	Usage      *UsageReport      `json:"usage,omitempty"`
}

// suggestions serves POST /dashboard/ai/suggestions.
func (h *handler) suggestions(c *gin.Context) {
	const route = "suggestions"
	who, ok := h.reader(c)
	if !ok {
		return
	}
	var in SuggestInput
	if !httpx.BindStrict(c, maxBody, &in, h.WriteError) {
		return
	}
	if in.DeviceUUID == "" {
		h.invalid(c, route, "deviceUuid: is required")
		return
	}
	ctx := c.Request.Context()
	tb, err := newToolbox(h.Deps, who.TenantUUID, h.Now())
	if err != nil {
		h.fail(c, route, err)
		return
	}
	ag, err := tb.agent(ctx, in.DeviceUUID)
	var te *toolError
	if errors.As(err, &te) {
		if te.Code == "not_found" {
			h.m.requests.WithLabelValues(route, "not_found").Inc()
			h.WriteError(c, http.StatusNotFound, "not_found", te.Msg)
		} else {
			h.invalid(c, route, te.Msg)
		}
		return
	}
	if err != nil {
		h.fail(c, route, err)
		return
	}
	schemas, err := h.inferSchemas(ctx, tb, ag.UUID, ag.Name, in.DeviceName)
	if err != nil {
		h.fail(c, route, err)
		return
	}
	s := Suggestion{DeviceUUID: ag.UUID, Source: "rules", Layout: propose(schemas), Metrics: schemas, Refinement: Refinement{Status: "off"}}
	if h.provider != nil {
		h.refine(ctx, &s)
		if errors.Is(ctx.Err(), context.Canceled) {
			h.fail(c, route, ctx.Err())
			return
		}
	}
	mark(s.Metrics, s.Layout)
	outcome := s.Source
	if s.Refinement.Status == "rejected" || s.Refinement.Status == "failed" {
		outcome = s.Refinement.Status
	}
	h.m.requests.WithLabelValues(route, outcome).Inc()
	c.JSON(http.StatusOK, s)
}

// inferSchemas reads the agent's catalogue and infers each metric's kind
// and range from its newest values.
func (h *handler) inferSchemas(ctx context.Context, tb *toolbox, agent, agentName, device string) ([]MetricSchema, error) {
	cat, err := h.Readings.Catalog(ctx, tb.key, agent)
	if err != nil {
		return nil, err
	}
	out := []MetricSchema{}
	for _, e := range cat {
		dev := e.DeviceName
		if !validName(dev) {
			dev = agentName
		}
		if device != "" && dev != device {
			continue
		}
		s := MetricSchema{Metric: e.MetricName, DeviceName: dev, Unit: e.Unit, Samples: e.SampleCount, Kind: KindEmpty}
		if utf8.RuneCountInString(s.Unit) > dashboards.MaxUnit {
			s.Unit = ""
		}
		switch {
		case len(out) >= maxSuggestMetrics:
			s.Skipped = "over the " + strconv.Itoa(maxSuggestMetrics) + " metrics a proposal considers"
			out = append(out, s)
			continue
		case !validName(e.MetricName) || !validName(dev):
			s.Skipped = "its metric or device name is not one a widget can hold"
			out = append(out, s)
			continue
		}
		values, err := h.Readings.Recent(ctx, tb.key, agent, e.MetricName, recentValues)
		if err != nil {
			return nil, err
		}
		infer(&s, values)
		out = append(out, s)
	}
	return out, nil
}

// infer sets the kind and range of s from values: boolean when every
// value is 0 or 1, numeric otherwise, empty without a finite value.
func infer(s *MetricSchema, values []float64) {
	lo, hi, n, binary := math.Inf(1), math.Inf(-1), 0, true
	for _, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		n++
		lo, hi = min(lo, v), max(hi, v)
		binary = binary && (v == 0 || v == 1)
	}
	switch {
	case n == 0:
		s.Kind, s.Skipped = KindEmpty, "no values to show (failed reads only)"
	case binary:
		s.Kind = KindBoolean
	default:
		s.Kind = KindNumeric
		s.Min, s.Max = &lo, &hi
	}
}

func validName(s string) bool {
	return s != "" && utf8.RuneCountInString(s) <= dashboards.MaxSourceName && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// propose lays out the deterministic proposal: a status (stat) widget per
// boolean metric, a gauge of the latest value per numeric metric with
// less than seriesMinSamples readings, a line chart per numeric metric
// with more; the first maxSingleWidgets of them in that order, the rest
// in a table per device.
func propose(schemas []MetricSchema) dashboards.Layout {
	var status, gauges, lines []MetricSchema
	for _, s := range schemas {
		switch {
		case s.Skipped != "":
		case s.Kind == KindBoolean:
			status = append(status, s)
		case s.Samples < seriesMinSamples:
			gauges = append(gauges, s)
		default:
			lines = append(lines, s)
		}
	}
	var f flow
	f.l = dashboards.NewLayout()
	single := 0
	var rest []MetricSchema
	for _, group := range [][]MetricSchema{status, gauges, lines} {
		for _, s := range group {
			if single == maxSingleWidgets {
				rest = append(rest, s)
				continue
			}
			single++
			w := dashboards.Widget{Type: dashboards.TypeLine, Title: title(s.Metric), W: 6, H: 4,
				Source:  dashboards.Source{DeviceName: s.DeviceName, Metric: s.Metric},
				Options: dashboards.Options{Unit: s.Unit}}
			switch {
			case s.Kind == KindBoolean:
				zero := 0
				w.Type, w.W, w.H, w.Options.Decimals = dashboards.TypeStat, 3, 2, &zero
			case s.Samples < seriesMinSamples:
				lo, hi := gaugeRange(s)
				w.Type, w.W, w.H, w.Options.Min, w.Options.Max = dashboards.TypeGauge, 3, 4, &lo, &hi
			default:
				w.Options.Window = dashboards.DefaultWindow
			}
			f.place(w)
		}
	}
	// The rest, a table per device in the order the devices come.
	var devices []string
	byDevice := map[string][]string{}
	for _, s := range rest {
		if byDevice[s.DeviceName] == nil {
			devices = append(devices, s.DeviceName)
		}
		byDevice[s.DeviceName] = append(byDevice[s.DeviceName], s.Metric)
	}
	for _, d := range devices {
		for ms := range slices.Chunk(byDevice[d], dashboards.MaxTableMetric) {
			if len(f.l.Widgets) == dashboards.MaxWidgets {
				break
			}
			rows := dashboards.DefaultTableRows
			f.place(dashboards.Widget{Type: dashboards.TypeTable, Title: title(d + ": other metrics"), W: 12, H: 4,
				Source: dashboards.Source{DeviceName: d, Metrics: ms}, Options: dashboards.Options{Rows: &rows}})
		}
	}
	if err := f.l.Validate(); err != nil {
		panic("BUG: proposed layout is invalid: " + err.Error())
	}
	return f.l
}

// gaugeRange is a gauge's scale: 0..100 for a percentage, else the
// observed range widened by a tenth on each side, to whole numbers.
func gaugeRange(s MetricSchema) (float64, float64) {
	if s.Unit == "%" {
		return 0, 100
	}
	lo, hi := *s.Min, *s.Max
	pad := (hi - lo) / 10
	if pad == 0 {
		pad = max(math.Abs(hi)/10, 1)
	}
	return math.Floor(lo - pad), math.Ceil(hi + pad)
}

func title(s string) string {
	if utf8.RuneCountInString(s) <= dashboards.MaxTitle {
		return s
	}
	return string([]rune(s)[:dashboards.MaxTitle])
}

// flow places widgets left to right in rows of the default grid.
type flow struct {
	l          dashboards.Layout
	x, y, rowH int
}

func (f *flow) place(w dashboards.Widget) {
	if f.x+w.W > f.l.Columns {
		f.x, f.y, f.rowH = 0, f.y+f.rowH, 0
	}
	w.ID = "w" + strconv.Itoa(len(f.l.Widgets)+1)
	w.X, w.Y = f.x, f.y
	f.x += w.W
	f.rowH = max(f.rowH, w.H)
	f.l.Widgets = append(f.l.Widgets, w)
}

// mark notes on each schema the widget that shows it.
func mark(schemas []MetricSchema, l dashboards.Layout) {
	shown := map[[2]string]string{}
	for _, w := range l.Widgets {
		for _, m := range append([]string{w.Source.Metric}, w.Source.Metrics...) {
			if k := [2]string{w.Source.DeviceName, m}; m != "" && shown[k] == "" {
				shown[k] = w.ID
			}
		}
	}
	for i := range schemas {
		s := &schemas[i]
		s.Widget = shown[[2]string{s.DeviceName, s.Metric}]
		if s.Widget == "" && s.Skipped == "" {
			s.Skipped = "left out by the model"
		}
		if s.Widget != "" {
			s.Skipped = ""
		}
	}
}

const refinePrompt = `You improve dashboard layouts of an industrial IoT platform. You get the metrics of one device with their inferred kind (boolean, numeric, empty), sample count and observed range, and a proposed layout.
Answer with one JSON layout document and nothing else, schemaVersion 1: {"schemaVersion":1,"columns":12,"widgets":[...]}.
A widget: {"id","type","title","x","y","w","h","source":{"deviceName","metric"},"options":{...}}; ids are 1..40 of A-Z a-z 0-9 _ -, unique. x+w <= columns, h 1..24, widgets must not overlap.
Types and their options: line (unit, window, step; window a Go duration 1m..168h), gauge (unit, min, max, decimals; min and max required, min < max), stat (unit, decimals, window), table (unit, rows 1..100 required; source.metrics instead of source.metric, 1..20 names).
Use only the metrics and device names given. Prefer status (stat) for boolean metrics, gauges for the latest value of a metric with few samples, line charts for metrics with history; group related metrics; give clear titles.`

// refine asks the model to improve s's proposal. A refinement that is
// not a valid layout of the catalogue's metrics is rejected and the
// proposal stays; so it does when the provider fails.
func (h *handler) refine(ctx context.Context, s *Suggestion) {
	var known []MetricSchema
	for _, m := range s.Metrics {
		if m.Skipped == "" {
			known = append(known, m)
		}
	}
	if len(known) == 0 {
		s.Refinement = Refinement{Status: "off", Reason: "no metric to show"}
		return
	}
	input, err := json.Marshal(map[string]any{"metrics": known, "proposal": s.Layout})
	if err != nil {
		panic("BUG: encode refinement input: " + err.Error())
	}
	budget := int64(h.Config.AITokenBudget)
	if budget <= 0 {
		budget = defaultBudget
	}
	req := Request{Messages: []Message{{Role: "system", Content: refinePrompt}, {Role: "user", Content: string(input)}}, MaxTokens: int(budget)}
	comp, err := h.provider.Complete(ctx, req)
	if err != nil {
		code := CodeProviderError
		if errors.Is(err, ErrTimeout) {
			code = CodeProviderTimeout
		}
		s.Refinement = Refinement{Status: "failed", Reason: code + ": " + err.Error()}
		return
	}
	u := &UsageReport{Budget: budget}
	h.spend(u, comp, req)
	s.Usage = u
	l, err := h.checkRefined(comp, known)
	if err != nil {
		s.Refinement = Refinement{Status: "rejected", Reason: clip(err.Error(), 1000)}
		return
	}
	s.Layout, s.Source, s.Refinement = l, "model", Refinement{Status: "applied"}
}

// checkRefined decodes the model's layout with the dashboard layout
// routes' own decoder and checks that it shows only known metrics.
func (h *handler) checkRefined(comp Completion, known []MetricSchema) (dashboards.Layout, error) {
	if len(comp.Message.ToolCalls) > 0 {
		return dashboards.Layout{}, errors.New("the model asked for tools instead of answering a layout")
	}
	l, err := dashboards.DecodeLayout(extractJSON(comp.Message.Content))
	if err != nil {
		return dashboards.Layout{}, fmt.Errorf("the model's layout breaks the schema: %w", err)
	}
	if len(l.Widgets) == 0 {
		return dashboards.Layout{}, errors.New("the model's layout has no widgets")
	}
	ok := map[[2]string]bool{}
	for _, m := range known {
		ok[[2]string{m.DeviceName, m.Metric}] = true
	}
	for i, w := range l.Widgets {
		for _, m := range append([]string{w.Source.Metric}, w.Source.Metrics...) {
			if m != "" && !ok[[2]string{w.Source.DeviceName, m}] {
				return dashboards.Layout{}, fmt.Errorf("widgets[%d].source: metric %q of device %q is not in the catalogue", i, clip(m, 64), clip(w.Source.DeviceName, 64))
			}
		}
	}
	return l, nil
}

// extractJSON takes the JSON object out of a model's answer, which may
// wrap it in a Markdown code fence or a sentence.
func extractJSON(s string) []byte {
	b := []byte(strings.TrimSpace(s))
	i, j := bytes.IndexByte(b, '{'), bytes.LastIndexByte(b, '}')
	if i < 0 || j < i {
		return b
	}
	return b[i : j+1]
}

var (
	_ Readings  = readings.Reader{}
	_ Agents    = (*registry.Store)(nil)
	_ Incidents = (*anomaly.Anomaly)(nil)
	_ Events    = LogEvents{}
)
