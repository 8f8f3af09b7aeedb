package dashboards

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxGeneratedWidgets bounds the widgets of a generated default layout.
const MaxGeneratedWidgets = 6

// GeneratedName is the name of a generated default layout.
const GeneratedName = "Default"

// generatedSQL finds the first metrics (in name order) the agent has
// readings of, by a loose index scan of the readings key (agent_uuid,
// metric_name, time): one probe per metric, at most $2 of them, however
// many rows each holds; then each one's newest device name and unit,
// one more probe each. The agent is known to be the caller's tenant's
// (the registry decides, as for the readings routes), so its readings
// are.
const generatedSQL = `WITH RECURSIVE m(name, n) AS (
  SELECT (SELECT r.metric_name FROM readings r WHERE r.agent_uuid = $1 ORDER BY r.metric_name LIMIT 1), 1
  UNION ALL
  SELECT (SELECT r.metric_name FROM readings r WHERE r.agent_uuid = $1 AND r.metric_name > m.name ORDER BY r.metric_name LIMIT 1), m.n + 1
  FROM m WHERE m.name IS NOT NULL AND m.n < $2
)
SELECT m.name,
  (SELECT r.device_name FROM readings r WHERE r.agent_uuid = $1 AND r.metric_name = m.name ORDER BY r.time DESC LIMIT 1),
  (SELECT r.unit FROM readings r WHERE r.agent_uuid = $1 AND r.metric_name = m.name ORDER BY r.time DESC LIMIT 1)
FROM m WHERE m.name IS NOT NULL ORDER BY m.n`

// series is a metric of an agent with its newest device name and unit.
type series struct {
	metric, device, unit string
}

// generate builds the default layout of tenant's agent that has none
// stored: a line chart per metric it has readings of, two to a row.
func (s *store) generate(ctx context.Context, agent, agentName string) (Dashboard, error) {
	rows, err := s.db.ReadSQL().QueryContext(ctx, generatedSQL, agent, MaxGeneratedWidgets)
	if err != nil {
		return Dashboard{}, fmt.Errorf("find metrics of %s: %w", agent, err)
	}
	defer rows.Close()
	var found []series
	for rows.Next() {
		var m string
		var device, unit sql.NullString
		if err := rows.Scan(&m, &device, &unit); err != nil {
			return Dashboard{}, fmt.Errorf("find metrics of %s: %w", agent, err)
		}
		found = append(found, series{metric: m, device: device.String, unit: unit.String})
	}
	if err := rows.Err(); err != nil {
		return Dashboard{}, fmt.Errorf("find metrics of %s: %w", agent, err)
	}
	l := generatedLayout(found, agentName)
	if err := l.Validate(); err != nil {
		panic("BUG: generated layout is invalid: " + err.Error())
	}
	return Dashboard{DeviceUUID: agent, Name: GeneratedName, IsDefault: true, Layout: l, Generated: true}, nil
}

// generatedLayout lays out a line chart per series, 6 columns wide and 4
// rows high, two to a row. A reading without a device name is shown
// under the agent's name; a metric name or unit the schema cannot hold
// is left out rather than clipped into another series' name.
func generatedLayout(found []series, agentName string) Layout {
	l := NewLayout()
	for _, sr := range found {
		if !validName(sr.metric) || len(l.Widgets) == MaxGeneratedWidgets {
			continue
		}
		device := sr.device
		if !validName(device) {
			device = agentName
		}
		if !validName(device) {
			continue
		}
		i := len(l.Widgets)
		w := Widget{ID: fmt.Sprintf("w%d", i+1), Type: TypeLine, Title: clipRunes(sr.metric, MaxTitle),
			X: (i % 2) * 6, Y: (i / 2) * 4, W: 6, H: 4,
			Source:  Source{DeviceName: device, Metric: sr.metric},
			Options: Options{Window: DefaultWindow}}
		if utf8.RuneCountInString(sr.unit) <= MaxUnit {
			w.Options.Unit = sr.unit
		}
		l.Widgets = append(l.Widgets, w)
	}
	return l
}

func validName(s string) bool {
	return s != "" && utf8.RuneCountInString(s) <= MaxSourceName && !strings.ContainsFunc(s, isControl)
}

func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
