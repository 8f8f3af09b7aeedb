package export

import (
	"bytes"
	"database/sql"
	"errors"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/api/readings"
)

func TestLinkTokens(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const job, secret = "c0000000-0000-4000-8000-000000000001", "s3cret"
	good := signLink(secret, job, now.Add(time.Hour))
	for _, tc := range []struct {
		name, secret, job, token string
		at                       time.Time
		want                     error
	}{
		{"valid", secret, job, good, now, nil},
		{"valid until its last second", secret, job, good, now.Add(time.Hour - time.Second), nil},
		{"expired", secret, job, good, now.Add(time.Hour), errLinkExpired},
		{"another job", secret, "c0000000-0000-4000-8000-000000000002", good, now, errBadToken},
		{"another secret", "other", job, good, now, errBadToken},
		{"expiry moved", secret, job, "9" + good, now, errBadToken},
		{"mac cut", secret, job, good[:len(good)-2], now, errBadToken},
		{"no dot", secret, job, strings.ReplaceAll(good, ".", ""), now, errBadToken},
		{"empty", secret, job, "", now, errBadToken},
		{"not base64", secret, job, "1.!!", now, errBadToken},
	} {
		_, err := verifyLink(tc.secret, tc.job, tc.token, tc.at)
		if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCSVRows(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 120000000, time.UTC)
	for _, tc := range []struct {
		name    string
		buckets bool
		row     readings.Row
		want    string
	}{
		{"raw", false, readings.Row{AgentUUID: "a", MetricName: "m,x", Time: at, Value: sql.NullFloat64{Float64: 1.5, Valid: true},
			Quality: "GOOD", DeviceName: "m", Protocol: "modbus", Unit: "°C", AnomalyScore: sql.NullFloat64{Float64: 0.25, Valid: true}},
			`2026-12-01T12:00:00.12Z,a,"m,x",1.5,GOOD,m,modbus,°C,0.25`},
		{"no value", false, readings.Row{AgentUUID: "a", MetricName: `m"q`, Time: at, Quality: "BAD"},
			`2026-12-01T12:00:00.12Z,a,"m""q",,BAD,,,,`},
		{"non-finite", false, readings.Row{AgentUUID: "a", MetricName: "m", Time: at, Value: sql.NullFloat64{Float64: math.Inf(-1), Valid: true},
			AnomalyScore: sql.NullFloat64{Float64: math.NaN(), Valid: true}},
			`2026-12-01T12:00:00.12Z,a,m,-Inf,,,,,NaN`},
		{"bucket", true, readings.Row{AgentUUID: "a", MetricName: "m", Time: at, Min: 1e21, Max: math.Inf(1), Avg: 1.0 / 3, Count: 7},
			`2026-12-01T12:00:00.12Z,a,m,1e+21,+Inf,0.3333333333333333,7`},
	} {
		var b bytes.Buffer
		e, err := newCSV(&b, tc.buckets)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.write(&tc.row); err != nil {
			t.Fatal(err)
		}
		if err := e.close(); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if len(lines) != 2 || lines[1] != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, lines, tc.want)
		}
	}
}

// TestSelectionRoundTrip: a job stores its selection as a query string
// that reads back to the same selection, whenever the job runs.
func TestSelectionRoundTrip(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, q := range []string{
		"",
		"agent_uuid=A1000000-0000-4000-8000-000000000001&agent_uuid=a2000000-0000-4000-8000-000000000002&metric=b&metric=a&step=90s",
		"start=2026-11-30T10:00:00.5%2B01:00&end=1796126400000&step=1d&format=parquet",
		"step=raw&metric=x%2Cy",
	} {
		v, _ := url.ParseQuery(q)
		sel, err := readings.ParseSelection(v, now, "format")
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		back, err := readings.ParseSelection(sel.Query(), now.Add(48*time.Hour))
		if err != nil {
			t.Fatalf("%q stored as %q: %v", q, sel.Query().Encode(), err)
		}
		if back.Step != sel.Step || !back.Start.Equal(sel.Start) || !back.End.Equal(sel.End) ||
			strings.Join(back.Agents, ",") != strings.Join(sel.Agents, ",") || strings.Join(back.Metrics, ",") != strings.Join(sel.Metrics, ",") {
			t.Errorf("%q: %+v read back as %+v", q, sel, back)
		}
	}
}

// FuzzParseSelection: whatever the query string, ParseSelection answers a
// bad parameter or a selection that survives its round trip.
func FuzzParseSelection(f *testing.F) {
	for _, s := range []string{"", "agent_uuid=a1000000-0000-4000-8000-000000000001&metric=m&step=1h",
		"start=1&end=2&step=raw", "step=1y2w3d4h5m6s", "start=0001-01-01T00:00:00Z&end=9999-12-31T23:59:59.999999Z"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		v, err := url.ParseQuery(s)
		if err != nil {
			return
		}
		sel, err := readings.ParseSelection(v, now)
		if err != nil {
			if _, ok := readings.ParamMessage(err); !ok {
				t.Fatalf("%q: not a parameter error: %v", s, err)
			}
			return
		}
		if sel.Start.After(sel.End) || sel.Step < 0 {
			t.Fatalf("%q: %+v", s, sel)
		}
		if _, err := readings.ParseSelection(sel.Query(), now); err != nil {
			t.Fatalf("%q stored as %q: %v", s, sel.Query().Encode(), err)
		}
	})
}

// FuzzVerifyLink: no token but the signed one opens the link.
func FuzzVerifyLink(f *testing.F) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const job, secret = "c0000000-0000-4000-8000-000000000001", "s3cret"
	good := signLink(secret, job, now.Add(time.Hour))
	f.Add(good)
	f.Add("1.AAAA")
	f.Fuzz(func(t *testing.T, token string) {
		if _, err := verifyLink(secret, job, token, now); err == nil && token != good {
			t.Fatalf("token %q opens the link", token)
		}
	})
}
