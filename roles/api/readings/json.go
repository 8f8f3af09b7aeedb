package readings

import (
	"math"
	"strconv"
	"time"
)

// number is a reading value in a response. Values JSON numbers cannot hold
// (PostgreSQL stores NaN and infinities) are written as the strings "NaN",
// "+Inf" and "-Inf", as the query endpoint does, instead of failing the
// whole response.
type number float64

// MarshalJSON implements json.Marshaler.
func (n number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// utcTime is a time in a response: RFC 3339 in UTC, whatever zone the
// driver returned it in.
type utcTime time.Time

// MarshalJSON implements json.Marshaler.
func (t utcTime) MarshalJSON() ([]byte, error) {
	return []byte(`"` + formatTime(time.Time(t)) + `"`), nil
}

// reading is one stored reading, as /readings/latest answers it. Absent
// text attributes (NULL) are empty strings; Value is null for a reading
// stored without one (a failed read, with its quality). AnomalyScore is
// the agent's anomaly score, left out when it sent none.
type reading struct {
	AgentUUID    string  `json:"agentUuid"`
	MetricName   string  `json:"metricName"`
	DeviceName   string  `json:"deviceName"`
	Protocol     string  `json:"protocol"`
	Unit         string  `json:"unit"`
	Quality      string  `json:"quality"`
	Time         utcTime `json:"time"`
	Value        *number `json:"value"`
	AnomalyScore *number `json:"anomalyScore,omitempty"`
}

// bucket summarises the values of one series in one time bucket. Time is
// the bucket's start.
type bucket struct {
	Time  utcTime `json:"time"`
	Min   number  `json:"min"`
	Max   number  `json:"max"`
	Avg   number  `json:"avg"`
	Count int64   `json:"count"`
}

// bucketSeries is one (agent, metric) pair's buckets, in time order.
type bucketSeries struct {
	AgentUUID  string   `json:"agentUuid"`
	MetricName string   `json:"metricName"`
	Buckets    []bucket `json:"buckets"`
}

// rawPoint is one stored reading of a raw time series.
type rawPoint struct {
	Time         utcTime `json:"time"`
	Value        *number `json:"value"`
	Quality      string  `json:"quality"`
	AnomalyScore *number `json:"anomalyScore,omitempty"`
}

func numberPtr(v float64, valid bool) *number {
	if !valid {
		return nil
	}
	n := number(v)
	return &n
}

func timeOf(t utcTime) time.Time { return time.Time(t) }
