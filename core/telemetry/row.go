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
	// AnomalyScore is the agent's score of the value, nil when it sent
	// none.
	AnomalyScore *float64
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
			Time:         t.UTC().Truncate(time.Microsecond),
			AgentUUID:    agent,
			MetricName:   m.DeviceName + "." + r.Name,
			Value:        r.Value,
			Protocol:     m.Protocol,
			Unit:         r.Unit,
			Quality:      r.Quality,
			DeviceName:   m.DeviceName,
			TenantID:     tenantID,
			AnomalyScore: r.AnomalyScore,
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
// A batch holds tens of thousands of rows but far fewer series (agent and
// metric): each poll of a device repeats its metrics at a new time. So the
// series are numbered in key order first, comparing their UUIDs and names
// once per series instead of on every step of the sort, and the rows are
// sorted on integers: series number, time, input position (the position
// keeps equal keys in input order). Each row is then moved once to its
// place, following the permutation's cycles, rather than twice on every
// swap of a sort of the 150-byte rows themselves. BenchmarkNormalize:
// 50,000 rows in 5 ms instead of 18 ms with string comparisons.
func Normalize(rows []Row) []Row {
	if len(rows) < 2 {
		return rows
	}
	if len(rows) > math.MaxInt32 {
		panic("BUG: Normalize: more rows than int32 indices")
	}
	keys := make([]rowKey, len(rows))
	type series struct {
		agent  codec.UUID
		metric string
	}
	numbers := make(map[series]int32)
	var first []int32 // the first row of each series, by series number
	for i := range rows {
		r := &rows[i]
		n, ok := numbers[series{r.AgentUUID, r.MetricName}]
		if !ok {
			n = int32(len(first))
			numbers[series{r.AgentUUID, r.MetricName}] = n
			first = append(first, int32(i))
		}
		keys[i] = rowKey{series: n, sec: r.Time.Unix(), nsec: int32(r.Time.Nanosecond()), pos: int32(i)}
	}
	// Renumber the series in key order.
	order := make([]int32, len(first))
	for n := range order {
		order[n] = int32(n)
	}
	slices.SortFunc(order, func(a, b int32) int {
		ra, rb := &rows[first[a]], &rows[first[b]]
		if c := bytes.Compare(ra.AgentUUID[:], rb.AgentUUID[:]); c != 0 {
			return c
		}
		return cmp.Compare(ra.MetricName, rb.MetricName)
	})
	rank := make([]int32, len(first))
	for pos, n := range order {
		rank[n] = int32(pos)
	}
	for i := range keys {
		keys[i].series = rank[keys[i].series]
	}
	slices.SortFunc(keys, compareRowKeys)
	idx := make([]int32, len(keys))
	for k := range keys {
		idx[k] = keys[k].pos
	}
	permute(rows, idx)
	out := rows[:0]
	for i := range rows {
		// Equal keys are adjacent and in input order: keep the last.
		if i+1 < len(rows) && keys[i].sameKey(&keys[i+1]) {
			continue
		}
		out = append(out, rows[i])
	}
	return out
}

// rowKey is a row's key in integers: its series' rank in key order, its
// time as Unix seconds and nanoseconds, which order as time.Time.Compare
// does, and its input position.
type rowKey struct {
	sec    int64
	series int32
	nsec   int32
	pos    int32
}

func compareRowKeys(a, b rowKey) int {
	if a.series != b.series {
		return cmp.Compare(a.series, b.series)
	}
	if a.sec != b.sec {
		return cmp.Compare(a.sec, b.sec)
	}
	if a.nsec != b.nsec {
		return cmp.Compare(a.nsec, b.nsec)
	}
	return cmp.Compare(a.pos, b.pos)
}

func (k *rowKey) sameKey(o *rowKey) bool {
	return k.series == o.series && k.sec == o.sec && k.nsec == o.nsec
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
