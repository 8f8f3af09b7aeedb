package dashboards

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The layout document, schema version 1 (docs/dashboards.md, section
// "Layout document"). Every limit below is part of the contract with the
// web console, which renders what these types describe.
const (
	// SchemaVersion is the one version this API reads and writes.
	SchemaVersion = 1
	// MaxLayoutBytes bounds a layout document as sent.
	MaxLayoutBytes = 64 << 10
	// DefaultColumns is the grid's width when a document gives none.
	DefaultColumns = 12
	MaxColumns     = 24
	MaxWidgets     = 50
	MaxWidgetID    = 40
	MaxTitle       = 100
	MaxY           = 1000
	MaxHeight      = 24
	MaxSourceName  = 200
	MaxTableMetric = 20
	MaxUnit        = 20
	MaxDecimals    = 6
	MaxTableRows   = 100
	// DefaultTableRows is a table widget's rows when its options give none.
	DefaultTableRows = 10
	// DefaultWindow is a line widget's window when its options give none.
	DefaultWindow = "15m"
	MinWindow     = time.Minute
	MaxWindow     = 7 * 24 * time.Hour
	MinStep       = time.Second
	// maxProblems bounds one answer's list; a document that breaks more
	// rules than this has to be fixed in rounds.
	maxProblems = 50
)

// Widget types.
const (
	TypeLine  = "line"
	TypeGauge = "gauge"
	TypeStat  = "stat"
	TypeTable = "table"
)

// widgetTypes are the types in the order messages list them.
var widgetTypes = []string{TypeLine, TypeGauge, TypeStat, TypeTable}

// optionsOf lists the options each type takes, unit first (all take it).
var optionsOf = map[string][]string{
	TypeLine:  {"unit", "window", "step"},
	TypeGauge: {"unit", "min", "max", "decimals"},
	TypeStat:  {"unit", "decimals", "window"},
	TypeTable: {"unit", "rows"},
}

// allOptions is every option some type takes.
var allOptions = []string{"unit", "window", "step", "min", "max", "decimals", "rows"}

var widgetIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Layout is a dashboard's layout document: a grid of widgets.
type Layout struct {
	SchemaVersion int      `json:"schemaVersion"`
	Columns       int      `json:"columns"`
	Widgets       []Widget `json:"widgets"`
}

// Widget is one cell of the grid: x and w count columns, y and h rows.
type Widget struct {
	ID      string  `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title,omitempty"`
	X       int     `json:"x"`
	Y       int     `json:"y"`
	W       int     `json:"w"`
	H       int     `json:"h"`
	Source  Source  `json:"source"`
	Options Options `json:"options"`
}

// Source is what a widget shows: one metric of a device of the agent, or
// for a table several metrics of that device.
type Source struct {
	DeviceName string   `json:"deviceName"`
	Metric     string   `json:"metric,omitempty"`
	Metrics    []string `json:"metrics,omitempty"`
}

// Options are a widget's display options; which ones a type takes is in
// optionsOf. Pointers tell an absent number from zero.
type Options struct {
	Unit     string   `json:"unit,omitempty"`
	Window   string   `json:"window,omitempty"`
	Step     string   `json:"step,omitempty"`
	Min      *float64 `json:"min,omitempty"`
	Max      *float64 `json:"max,omitempty"`
	Decimals *int     `json:"decimals,omitempty"`
	Rows     *int     `json:"rows,omitempty"`
}

// Problem is one rule a document breaks, at a JSON path such as
// "widgets[2].w".
type Problem struct {
	Path string
	Msg  string
}

// ValidationError lists the problems of a document.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Path + ": " + p.Msg
	}
	return strings.Join(parts, "; ")
}

// Is makes a ValidationError an ErrInvalid: a document that breaks the
// schema is answered as any other broken rule (422 validation_failed).
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// under returns the problems with prefix before each path, as the API
// names the document inside its request body ("layout.widgets[2].w").
func (e *ValidationError) under(prefix string) *ValidationError {
	out := &ValidationError{Problems: make([]Problem, len(e.Problems))}
	for i, p := range e.Problems {
		out.Problems[i] = Problem{Path: prefix + "." + p.Path, Msg: p.Msg}
		if p.Path == "" {
			out.Problems[i].Path = prefix
		}
	}
	return out
}

// problems collects Problems up to maxProblems.
type problems struct {
	list []Problem
	// bad are the paths the decoder refused, whose zero values the rule
	// checks must not report a second time.
	bad map[string]bool
	// count is every problem found, kept or not.
	count int
}

func (p *problems) addf(path, format string, args ...any) {
	if p.bad == nil {
		p.bad = map[string]bool{}
	}
	p.bad[path] = true
	p.count++
	if len(p.list) < maxProblems {
		p.list = append(p.list, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: p.list}
}

// NewLayout is an empty layout of the default grid.
func NewLayout() Layout {
	return Layout{SchemaVersion: SchemaVersion, Columns: DefaultColumns, Widgets: []Widget{}}
}

// DecodeLayout reads a layout document as clients send it: strictly (an
// unknown key at any level is a problem), then checked by Validate, with
// the defaults filled in. Every problem found is named by its path.
func DecodeLayout(b []byte) (Layout, error) {
	if len(b) > MaxLayoutBytes {
		return Layout{}, &ValidationError{Problems: []Problem{{Msg: fmt.Sprintf("%d bytes is over the %d-byte limit", len(b), MaxLayoutBytes)}}}
	}
	d := &decoder{}
	l, ok := d.layout(b)
	if !ok {
		return Layout{}, d.err()
	}
	l.fillDefaults(d.present)
	var v problems
	l.check(&v)
	for _, p := range v.list {
		if !d.refused(p.Path) {
			d.list = append(d.list, p)
		}
	}
	// In document order: the layout's own keys, then widget by widget.
	slices.SortStableFunc(d.list, func(a, b Problem) int { return widgetIndex(a.Path) - widgetIndex(b.Path) })
	if len(d.list) > maxProblems {
		d.list = d.list[:maxProblems]
	}
	if err := d.err(); err != nil {
		return Layout{}, err
	}
	return l, nil
}

// fillDefaults sets what the document left out; present holds the paths
// it gave.
func (l *Layout) fillDefaults(present map[string]bool) {
	// Zero is an absent or refused columns (the decoder reported an
	// explicit 0): the default grid lets the widgets be checked.
	if l.Columns == 0 {
		l.Columns = DefaultColumns
	}
	if l.Widgets == nil {
		l.Widgets = []Widget{}
	}
	for i := range l.Widgets {
		w := &l.Widgets[i]
		switch w.Type {
		case TypeLine:
			if !present[widgetPath(i)+".options.window"] {
				w.Options.Window = DefaultWindow
			}
		case TypeTable:
			if w.Options.Rows == nil && !present[widgetPath(i)+".options.rows"] {
				n := DefaultTableRows
				w.Options.Rows = &n
			}
		}
	}
}

// Validate checks every rule of the schema on a layout built in code or
// read back from storage; DecodeLayout applies it to what clients send.
func (l Layout) Validate() error {
	var p problems
	l.check(&p)
	return p.err()
}

// widgetIndex is the widget a problem's path is in, -1 for none.
func widgetIndex(path string) int {
	rest, ok := strings.CutPrefix(path, "widgets[")
	if !ok {
		return -1
	}
	end := strings.IndexByte(rest, ']')
	n, err := strconv.Atoi(rest[:max(end, 0)])
	if err != nil {
		return -1
	}
	return n
}

func widgetPath(i int) string { return "widgets[" + strconv.Itoa(i) + "]" }

func (l Layout) check(p *problems) {
	if l.SchemaVersion != SchemaVersion {
		p.addf("schemaVersion", "unsupported version %d (supported: %d)", l.SchemaVersion, SchemaVersion)
	}
	cols := l.Columns
	if cols < 1 || cols > MaxColumns {
		p.addf("columns", "must be 1..%d, got %d", MaxColumns, l.Columns)
		// The widgets are still checked, on the widest grid.
		cols = MaxColumns
	}
	if len(l.Widgets) > MaxWidgets {
		p.addf("widgets", "at most %d widgets, got %d", MaxWidgets, len(l.Widgets))
		return
	}
	seen := map[string]int{}
	placed := make([]bool, len(l.Widgets))
	for i, w := range l.Widgets {
		path := widgetPath(i)
		switch {
		case w.ID == "" || len(w.ID) > MaxWidgetID || !widgetIDPattern.MatchString(w.ID):
			p.addf(path+".id", "must be 1..%d characters of A-Z a-z 0-9 _ -, got %s", MaxWidgetID, quote(w.ID))
		default:
			if j, dup := seen[w.ID]; dup {
				p.addf(path+".id", "%s is also the id of widgets[%d]", quote(w.ID), j)
			} else {
				seen[w.ID] = i
			}
		}
		if !slices.Contains(widgetTypes, w.Type) {
			p.addf(path+".type", "must be one of %s, got %s", strings.Join(widgetTypes, ", "), quote(w.Type))
		}
		if utf8.RuneCountInString(w.Title) > MaxTitle {
			p.addf(path+".title", "at most %d characters", MaxTitle)
		}
		placed[i] = checkGeometry(p, path, w, cols)
		checkSource(p, path+".source", w)
		checkOptions(p, path+".options", w)
	}
	// Overlaps are checked among widgets whose place is valid; n is at
	// most MaxWidgets, so the pairwise check stays small.
	for j := range l.Widgets {
		for i := range j {
			a, b := l.Widgets[i], l.Widgets[j]
			if placed[i] && placed[j] && a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				p.addf(widgetPath(j), "widget %s overlaps widget %s (widgets[%d])", quote(b.ID), quote(a.ID), i)
			}
		}
	}
}

// checkGeometry reports whether the widget's place on the grid is valid.
func checkGeometry(p *problems, path string, w Widget, columns int) bool {
	n := p.count
	cols := columns
	if w.X < 0 || w.X >= cols {
		p.addf(path+".x", "must be 0..%d, got %d", cols-1, w.X)
	}
	if w.Y < 0 || w.Y > MaxY {
		p.addf(path+".y", "must be 0..%d, got %d", MaxY, w.Y)
	}
	switch {
	case w.W < 1 || w.W > cols:
		p.addf(path+".w", "must be 1..%d, got %d", cols, w.W)
	case w.X >= 0 && w.X+w.W > cols:
		p.addf(path+".w", "x + w is %d, past the grid's %d columns", w.X+w.W, cols)
	}
	if w.H < 1 || w.H > MaxHeight {
		p.addf(path+".h", "must be 1..%d, got %d", MaxHeight, w.H)
	}
	return p.count == n
}

func checkName(p *problems, path, what, s string) {
	if s == "" || utf8.RuneCountInString(s) > MaxSourceName || strings.ContainsFunc(s, isControl) {
		p.addf(path, "%s must be 1..%d characters without control characters, got %s", what, MaxSourceName, quote(s))
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func checkSource(p *problems, path string, w Widget) {
	s := w.Source
	checkName(p, path+".deviceName", "a device name", s.DeviceName)
	switch {
	case w.Type == TypeTable && s.Metrics != nil:
		if s.Metric != "" {
			p.addf(path, "give metric or metrics, not both")
		}
		if len(s.Metrics) < 1 || len(s.Metrics) > MaxTableMetric {
			p.addf(path+".metrics", "must list 1..%d metric names, got %d", MaxTableMetric, len(s.Metrics))
			return
		}
		seen := map[string]bool{}
		for i, m := range s.Metrics {
			mp := path + ".metrics[" + strconv.Itoa(i) + "]"
			checkName(p, mp, "a metric name", m)
			if seen[m] {
				p.addf(mp, "%s is listed twice", quote(m))
			}
			seen[m] = true
		}
	case s.Metrics != nil:
		p.addf(path+".metrics", "only a table widget takes metrics (give metric)")
	default:
		checkName(p, path+".metric", "a metric name", s.Metric)
	}
}

func checkOptions(p *problems, path string, w Widget) {
	o := w.Options
	allowed, known := optionsOf[w.Type]
	set := map[string]bool{"unit": o.Unit != "", "window": o.Window != "", "step": o.Step != "",
		"min": o.Min != nil, "max": o.Max != nil, "decimals": o.Decimals != nil, "rows": o.Rows != nil}
	if known {
		for _, k := range allOptions {
			if set[k] && !slices.Contains(allowed, k) {
				p.addf(path+"."+k, "not an option of a %s widget (it takes %s)", w.Type, strings.Join(allowed, ", "))
			}
		}
	}
	if utf8.RuneCountInString(o.Unit) > MaxUnit {
		p.addf(path+".unit", "at most %d characters", MaxUnit)
	}
	if set["window"] || w.Type == TypeLine {
		checkDuration(p, path+".window", o.Window, MinWindow, MaxWindow)
	}
	if set["step"] {
		checkDuration(p, path+".step", o.Step, MinStep, MaxWindow)
	}
	if o.Decimals != nil && (*o.Decimals < 0 || *o.Decimals > MaxDecimals) {
		p.addf(path+".decimals", "must be 0..%d, got %d", MaxDecimals, *o.Decimals)
	}
	if o.Rows != nil && (*o.Rows < 1 || *o.Rows > MaxTableRows) {
		p.addf(path+".rows", "must be 1..%d, got %d", MaxTableRows, *o.Rows)
	}
	if w.Type == TypeTable && o.Rows == nil {
		p.addf(path+".rows", "is required for a table widget (default %d)", DefaultTableRows)
	}
	if w.Type == TypeGauge {
		if o.Min == nil {
			p.addf(path+".min", "is required for a gauge widget")
		}
		if o.Max == nil {
			p.addf(path+".max", "is required for a gauge widget")
		}
		if o.Min != nil && o.Max != nil && !(*o.Min < *o.Max) {
			p.addf(path+".max", "must be above min (%g), got %g", *o.Min, *o.Max)
		}
	}
}

// checkDuration checks a Go duration string against [lo, hi].
func checkDuration(p *problems, path, s string, lo, hi time.Duration) {
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		p.addf(path, "must be a Go duration from %s to %s (such as 15m or 24h), got %s", fmtDuration(lo), fmtDuration(hi), quote(s))
	}
}

// fmtDuration writes a limit without Go's trailing zero units ("1m", not
// "1m0s").
func fmtDuration(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"0s", "0m"} {
		if strings.HasSuffix(s, "m"+z) || strings.HasSuffix(s, "h"+z) {
			s = strings.TrimSuffix(s, z)
		}
	}
	return s
}

// quote quotes a value for a message, clipped so an answer stays short.
func quote(s string) string {
	if len(s) > 64 {
		s = strings.ToValidUTF8(s[:64], "") + "…"
	}
	return strconv.Quote(s)
}

// decoder reads the JSON of a document into a Layout, refusing unknown
// keys and values of the wrong JSON type, and remembers the paths given.
type decoder struct {
	problems
	present map[string]bool
}

func (d *decoder) refused(path string) bool {
	for bad := range d.bad {
		if path == bad || strings.HasPrefix(path, bad+".") || strings.HasPrefix(path, bad+"[") {
			return true
		}
	}
	return false
}

// value decodes one JSON value; null is refused, since a key that is
// sent must mean something.
func (d *decoder) value(path string, raw json.RawMessage, v any) bool {
	if d.present == nil {
		d.present = map[string]bool{}
	}
	d.present[path] = true
	if string(bytes.TrimSpace(raw)) == "null" {
		d.addf(path, "must not be null")
		return false
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			d.addf(path, "must be %s, got %s", kind(v), te.Value)
		} else {
			d.addf(path, "%v", err)
		}
		return false
	}
	return true
}

func kind(v any) string {
	switch v.(type) {
	case *int:
		return "an integer"
	case *float64:
		return "a number"
	case *string:
		return "a string"
	case *[]string:
		return "an array of strings"
	case *[]json.RawMessage:
		return "an array"
	}
	return "an object"
}

// object decodes a JSON object and refuses the keys not in keys.
func (d *decoder) object(path, label string, raw json.RawMessage, keys []string) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if !d.value(path, raw, &m) {
		return nil, false
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(keys, k) {
			d.addf(join(path, k), "unknown key (%s has %s)", label, strings.Join(keys, ", "))
			delete(m, k)
		}
	}
	return m, true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (d *decoder) required(m map[string]json.RawMessage, path string, keys ...string) {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			d.addf(join(path, k), "is required")
		}
	}
}

func (d *decoder) layout(b []byte) (Layout, bool) {
	var l Layout
	top, ok := d.object("", "a layout", b, []string{"schemaVersion", "columns", "widgets"})
	if !ok {
		// The whole document is refused: name it so the API's prefix
		// has a path to stand on.
		return l, false
	}
	d.required(top, "", "schemaVersion")
	if raw, ok := top["schemaVersion"]; ok && d.value("schemaVersion", raw, &l.SchemaVersion) && l.SchemaVersion != SchemaVersion {
		// Nothing else of a document of another version means what
		// version 1 says it means.
		d.addf("schemaVersion", "unsupported version %d (supported: %d)", l.SchemaVersion, SchemaVersion)
		return l, false
	}
	if raw, ok := top["columns"]; ok && d.value("columns", raw, &l.Columns) && l.Columns == 0 {
		d.addf("columns", "must be 1..%d, got 0", MaxColumns)
	}
	if raw, ok := top["widgets"]; ok {
		var list []json.RawMessage
		if d.value("widgets", raw, &list) {
			if len(list) > MaxWidgets {
				d.addf("widgets", "at most %d widgets, got %d", MaxWidgets, len(list))
			} else {
				l.Widgets = make([]Widget, len(list))
				for i, w := range list {
					l.Widgets[i] = d.widget(widgetPath(i), w)
				}
			}
		}
	}
	return l, true
}

var widgetKeys = []string{"id", "type", "title", "x", "y", "w", "h", "source", "options"}

func (d *decoder) widget(path string, raw json.RawMessage) Widget {
	var w Widget
	m, ok := d.object(path, "a widget", raw, widgetKeys)
	if !ok {
		return w
	}
	d.required(m, path, "id", "type", "x", "y", "w", "h", "source")
	for _, f := range []struct {
		key string
		dst any
	}{{"id", &w.ID}, {"type", &w.Type}, {"title", &w.Title}, {"x", &w.X}, {"y", &w.Y}, {"w", &w.W}, {"h", &w.H}} {
		if raw, ok := m[f.key]; ok {
			d.value(path+"."+f.key, raw, f.dst)
		}
	}
	if raw, ok := m["source"]; ok {
		w.Source = d.source(path+".source", raw)
	}
	if raw, ok := m["options"]; ok {
		w.Options = d.options(path+".options", w.Type, raw)
	}
	return w
}

func (d *decoder) source(path string, raw json.RawMessage) Source {
	var s Source
	m, ok := d.object(path, "a source", raw, []string{"deviceName", "metric", "metrics"})
	if !ok {
		return s
	}
	d.required(m, path, "deviceName")
	if raw, ok := m["deviceName"]; ok {
		d.value(path+".deviceName", raw, &s.DeviceName)
	}
	if raw, ok := m["metric"]; ok {
		d.value(path+".metric", raw, &s.Metric)
	}
	if raw, ok := m["metrics"]; ok {
		var list []string
		if d.value(path+".metrics", raw, &list) {
			s.Metrics = list
			if s.Metrics == nil {
				s.Metrics = []string{}
			}
		}
	}
	return s
}

func (d *decoder) options(path, typ string, raw json.RawMessage) Options {
	var o Options
	keys, known := optionsOf[typ]
	label := "a " + typ + " widget's options"
	if !known {
		keys, label = allOptions, "options"
	}
	m, ok := d.object(path, label, raw, keys)
	if !ok {
		return o
	}
	for _, k := range sortedKeys(m) {
		raw, p := m[k], path+"."+k
		switch k {
		case "unit":
			d.value(p, raw, &o.Unit)
		case "window":
			if d.value(p, raw, &o.Window) && o.Window == "" {
				d.addf(p, "must be a Go duration from %s to %s (such as 15m or 24h), got \"\"", fmtDuration(MinWindow), fmtDuration(MaxWindow))
			}
		case "step":
			if d.value(p, raw, &o.Step) && o.Step == "" {
				d.addf(p, "must be a Go duration from %s to %s, got \"\"", fmtDuration(MinStep), fmtDuration(MaxWindow))
			}
		case "min":
			d.number(p, raw, &o.Min)
		case "max":
			d.number(p, raw, &o.Max)
		case "decimals":
			d.integer(p, raw, &o.Decimals)
		case "rows":
			d.integer(p, raw, &o.Rows)
		}
	}
	return o
}

func (d *decoder) number(path string, raw json.RawMessage, dst **float64) {
	var f float64
	if d.value(path, raw, &f) {
		*dst = &f
	}
}

func (d *decoder) integer(path string, raw json.RawMessage, dst **int) {
	var n int
	if d.value(path, raw, &n) {
		*dst = &n
	}
}
