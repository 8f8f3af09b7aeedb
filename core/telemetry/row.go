package telemetry

import (
	"bytes"
	"cmp"
	"sort"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Row is one reading as stored: the key is (AgentUUID, MetricName, Time).
type Row struct {
	Time       time.Time
	AgentUUID  codec.UUID
	MetricName string
	Value      *float64
	Protocol   string
	Unit       string
	Quality    string
	DeviceName string
	TenantID   string
}

// Rows turns a validated message into rows. metric_name is
// "<deviceName>.<reading name>". A reading without a timestamp takes the
// message's, and a message without one takes fallback (the stream entry's
// time). Times are truncated to microseconds, the database's precision, so
// the in-batch de-duplication key equals the table key.
func (m *Message) Rows(tenantID string, fallback time.Time, dst []Row) []Row {
	agent, _ := ParseAgentUUID(m.AgentUUID) // checked by Validate
	base := fallback
	if m.Timestamp != nil {
		base = m.Timestamp.Time
	}
	for _, r := range m.Readings {
		t := base
		if r.Timestamp != nil {
			t = r.Timestamp.Time
		}
		dst = append(dst, Row{
			Time:       t.UTC().Truncate(time.Microsecond),
			AgentUUID:  agent,
			MetricName: m.DeviceName + "." + r.Name,
			Value:      r.Value,
			Protocol:   m.Protocol,
			Unit:       r.Unit,
			Quality:    r.Quality,
			DeviceName: m.DeviceName,
			TenantID:   tenantID,
		})
	}
	return dst
}

// CompareKey orders rows by the table's primary key.
func CompareKey(a, b *Row) int {
	if c := bytes.Compare(a.AgentUUID[:], b.AgentUUID[:]); c != 0 {
		return c
	}
	if c := cmp.Compare(a.MetricName, b.MetricName); c != 0 {
		return c
	}
	return a.Time.Compare(b.Time)
}

// Normalize sorts rows by key and drops in-batch duplicates, the last one in
// the input winning. Sorting by key makes concurrent batches take row locks
// in the same order, so they cannot deadlock each other. It reuses rows'
// backing array.
func Normalize(rows []Row) []Row {
	// A stable sort keeps equal keys in input order, so the last of each run
	// is the newest. sort.Stable with index access compares in place
	// instead of copying two rows per comparison.
	sort.Stable(byKey(rows))
	out := rows[:0]
	for i := range rows {
		if i+1 < len(rows) && CompareKey(&rows[i], &rows[i+1]) == 0 {
			continue
		}
		out = append(out, rows[i])
	}
	return out
}

type byKey []Row

func (r byKey) Len() int           { return len(r) }
func (r byKey) Less(i, j int) bool { return CompareKey(&r[i], &r[j]) < 0 }
func (r byKey) Swap(i, j int)      { r[i], r[j] = r[j], r[i] }
