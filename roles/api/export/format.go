package export

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/edgeplat/edgeplat/roles/api/readings"
)

// Formats an export is written in.
const (
	FormatCSV     = "csv"
	FormatParquet = "parquet"
)

// contentTypes are the formats' media types.
var contentTypes = map[string]string{
	FormatCSV:     "text/csv; charset=utf-8",
	FormatParquet: "application/vnd.apache.parquet",
}

// encoder writes rows in one format. close writes what ends the file
// (Parquet's footer); the output is not closed.
type encoder interface {
	write(r *readings.Row) error
	close() error
}

// newEncoder starts a file of format on w; buckets selects the columns of
// bucketed rows instead of raw readings.
func newEncoder(format string, w io.Writer, buckets bool) (encoder, error) {
	switch format {
	case FormatCSV:
		return newCSV(w, buckets)
	case FormatParquet:
		if buckets {
			return newParquet(w, bucketRecord)
		}
		return newParquet(w, rawRecord)
	}
	panic("BUG: export format " + strconv.Quote(format))
}

// Column names of both formats.
var (
	rawColumns    = []string{"time", "agent_uuid", "metric_name", "value", "quality", "device_name", "protocol", "unit", "anomaly_score"}
	bucketColumns = []string{"time", "agent_uuid", "metric_name", "min", "max", "avg", "count"}
)

// csvEncoder writes RFC 4180 CSV with a header line. Times are RFC 3339
// in UTC as the readings endpoints write them; numbers are the shortest
// text that reads back to the same float64, NaN and infinities as "NaN",
// "+Inf" and "-Inf"; an absent value is an empty field.
type csvEncoder struct {
	w       *csv.Writer
	buckets bool
	rec     []string
}

func newCSV(w io.Writer, buckets bool) (*csvEncoder, error) {
	e := &csvEncoder{w: csv.NewWriter(w), buckets: buckets}
	cols := rawColumns
	if buckets {
		cols = bucketColumns
	}
	e.rec = make([]string, len(cols))
	if err := e.w.Write(cols); err != nil {
		return nil, fmt.Errorf("write csv header: %w", err)
	}
	return e, nil
}

func (e *csvEncoder) write(r *readings.Row) error {
	rec := e.rec[:0]
	rec = append(rec, readings.FormatTime(r.Time), r.AgentUUID, r.MetricName)
	if e.buckets {
		rec = append(rec, formatFloat(r.Min), formatFloat(r.Max), formatFloat(r.Avg), strconv.FormatInt(r.Count, 10))
	} else {
		rec = append(rec, optFloat(r.Value.Float64, r.Value.Valid), r.Quality, r.DeviceName, r.Protocol, r.Unit,
			optFloat(r.AnomalyScore.Float64, r.AnomalyScore.Valid))
	}
	if err := e.w.Write(rec); err != nil {
		return fmt.Errorf("write csv row: %w", err)
	}
	return nil
}

func (e *csvEncoder) close() error {
	e.w.Flush()
	if err := e.w.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// formatFloat writes a value as the readings endpoints' JSON does.
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func optFloat(f float64, ok bool) string {
	if !ok {
		return ""
	}
	return formatFloat(f)
}

// rawRow is a raw reading in Parquet: time as TIMESTAMP(MICROS, UTC), the
// databases' resolution; the text columns dictionary-encoded, since a
// series repeats them on every row.
type rawRow struct {
	Time         int64    `parquet:"time,timestamp(microsecond:utc)"`
	AgentUUID    string   `parquet:"agent_uuid,dict"`
	MetricName   string   `parquet:"metric_name,dict"`
	Value        *float64 `parquet:"value,optional"`
	Quality      string   `parquet:"quality,dict"`
	DeviceName   string   `parquet:"device_name,dict"`
	Protocol     string   `parquet:"protocol,dict"`
	Unit         string   `parquet:"unit,dict"`
	AnomalyScore *float64 `parquet:"anomaly_score,optional"`
}

// bucketRow is one bucket of one series in Parquet.
type bucketRow struct {
	Time       int64   `parquet:"time,timestamp(microsecond:utc)"`
	AgentUUID  string  `parquet:"agent_uuid,dict"`
	MetricName string  `parquet:"metric_name,dict"`
	Min        float64 `parquet:"min"`
	Max        float64 `parquet:"max"`
	Avg        float64 `parquet:"avg"`
	Count      int64   `parquet:"count"`
}

// rawRecord and bucketRecord fill a Parquet row from a scanned row. The
// pointers of rawRow point into the row kept in the batch, never into r,
// which the scan reuses.
func rawRecord(dst *rawRow, r *readings.Row) {
	*dst = rawRow{Time: r.Time.UnixMicro(), AgentUUID: r.AgentUUID, MetricName: r.MetricName, Quality: r.Quality,
		DeviceName: r.DeviceName, Protocol: r.Protocol, Unit: r.Unit}
}

func bucketRecord(dst *bucketRow, r *readings.Row) {
	*dst = bucketRow{Time: r.Time.UnixMicro(), AgentUUID: r.AgentUUID, MetricName: r.MetricName,
		Min: r.Min, Max: r.Max, Avg: r.Avg, Count: r.Count}
}

// Parquet sizes. A row group is buffered whole before it is written, so
// rowGroupRows bounds the writer's memory (about 100 bytes a raw row
// before compression); batchRows rows are handed to the writer at once.
const (
	rowGroupRows = 64 * 1024
	batchRows    = 1024
)

// parquetEncoder writes rows of type T in batches.
type parquetEncoder[T any] struct {
	w     *parquet.GenericWriter[T]
	fill  func(*T, *readings.Row)
	batch []T
	// vals holds the optional values of the batch's rows.
	vals [][2]float64
}

func newParquet[T any](w io.Writer, fill func(*T, *readings.Row)) (*parquetEncoder[T], error) {
	return &parquetEncoder[T]{
		w: parquet.NewGenericWriter[T](w, parquet.MaxRowsPerRowGroup(rowGroupRows), parquet.Compression(&parquet.Snappy),
			parquet.CreatedBy("edgeplat", "", "")),
		fill:  fill,
		batch: make([]T, 0, batchRows),
		vals:  make([][2]float64, batchRows),
	}, nil
}

func (e *parquetEncoder[T]) write(r *readings.Row) error {
	i := len(e.batch)
	e.batch = e.batch[:i+1]
	e.fill(&e.batch[i], r)
	if raw, ok := any(&e.batch[i]).(*rawRow); ok {
		v := &e.vals[i]
		if r.Value.Valid {
			v[0] = r.Value.Float64
			raw.Value = &v[0]
		}
		if r.AnomalyScore.Valid {
			v[1] = r.AnomalyScore.Float64
			raw.AnomalyScore = &v[1]
		}
	}
	if len(e.batch) == cap(e.batch) {
		return e.flush()
	}
	return nil
}

func (e *parquetEncoder[T]) flush() error {
	if len(e.batch) == 0 {
		return nil
	}
	if _, err := e.w.Write(e.batch); err != nil {
		return fmt.Errorf("write parquet rows: %w", err)
	}
	e.batch = e.batch[:0]
	return nil
}

func (e *parquetEncoder[T]) close() error {
	if err := e.flush(); err != nil {
		return err
	}
	if err := e.w.Close(); err != nil {
		return fmt.Errorf("write parquet footer: %w", err)
	}
	return nil
}
