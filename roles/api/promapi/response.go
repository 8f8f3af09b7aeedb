package promapi

import "time"

// sample is one [time, "value"] pair.
type sample struct {
	t time.Time
	v float64
}

// MarshalJSON implements json.Marshaler.
func (s sample) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 40)
	b = append(b, '[')
	b = appendTime(b, s.t)
	b = append(b, ',')
	b = appendValue(b, s.v)
	return append(b, ']'), nil
}

// vectorSample is an element of an instant vector result.
type vectorSample struct {
	Metric map[string]string `json:"metric"`
	Value  sample            `json:"value"`
}

// matrixSeries is an element of a range vector result.
type matrixSeries struct {
	Metric map[string]string `json:"metric"`
	Values []sample          `json:"values"`
}

// queryData is the data of a query answer.
type queryData struct {
	ResultType string `json:"resultType"`
	Result     any    `json:"result"`
}

// response is Prometheus's answer envelope, success or error.
type response struct {
	Status    string   `json:"status"`
	Data      any      `json:"data,omitempty"`
	ErrorType string   `json:"errorType,omitempty"`
	Error     string   `json:"error,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}
