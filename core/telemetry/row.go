package telemetry

import (
	"bytes"
	"cmp"
	"math"
	"slices"
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
//
// A batch holds tens of thousands of rows of some 150 bytes each: a stable
// sort of the rows themselves moves two of them on each of its O(n log² n)
// swaps. Sorting 4-byte indices instead (the index breaks ties, which keeps
// equal keys in input order) and then moving each row once to its place,
// following the permutation's cycles, takes about a quarter less time on a
// 50,000-row batch (BenchmarkNormalize).
func Normalize(rows []Row) []Row {
	if len(rows) < 2 {
		return rows
	}
	if len(rows) > math.MaxInt32 {
		panic("BUG: Normalize: more rows than int32 indices")
	}
	idx := make([]int32, len(rows))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c := CompareKey(&rows[a], &rows[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	permute(rows, idx)
	out := rows[:0]
	for i := range rows {
		// Equal keys are adjacent and in input order: keep the last.
		if i+1 < len(rows) && CompareKey(&rows[i], &rows[i+1]) == 0 {
			continue
		}
		out = append(out, rows[i])
	}
	return out
}

// permute rearranges rows so that the new rows[k] is the old rows[idx[k]],
// moving each row once; it consumes idx.
func permute(rows []Row, idx []int32) {
	for start := range idx {
		if idx[start] < 0 || int(idx[start]) == start {
			continue
		}
		tmp := rows[start]
		k := start
		for {
			j := int(idx[k])
			idx[k] = -1
			if j == start {
				rows[k] = tmp
				break
			}
			rows[k] = rows[j]
			k = j
		}
	}
}
