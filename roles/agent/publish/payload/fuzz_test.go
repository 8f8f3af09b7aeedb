package payload

import (
	"math"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

// FuzzBuildRoundTrip builds every format from readings with arbitrary
// names, values and qualities (MQTT frames put outside text into all of
// them) and checks that each encodes in every wire format and decodes back
// to the same document.
func FuzzBuildRoundTrip(f *testing.F) {
	f.Add("plc-1", "temp", "C", "GOOD", "", 21.5, int64(3), "x", uint8(0), int64(0))
	f.Add("", "", "", "BAD", "TIMEOUT", math.NaN(), int64(-1), "", uint8(3), int64(-1))
	f.Add("d\x00\u2028", "~m", "\xff", "UNCERTAIN", "X", math.Inf(1), int64(math.MinInt64), "{\"a\":1}", uint8(5), int64(1e15))
	f.Fuzz(func(t *testing.T, dev, metric, unit, quality, code string, fv float64, iv int64, sv string, pick uint8, ms int64) {
		var v any
		switch pick % 6 {
		case 0:
			v = fv
		case 1:
			v = iv
		case 2:
			v = sv
		case 3:
			v = nil
		case 4:
			v = iv%2 == 0
		case 5:
			v = uint64(iv) + math.MaxInt64
		}
		at := time.UnixMilli(ms % (1 << 44)).UTC()
		r := adapters.Reading{DeviceName: dev, Metric: metric, Unit: unit, Quality: quality, QualityCode: code, Value: v, Timestamp: at}
		other := adapters.Reading{DeviceName: dev + "2", Metric: metric, Value: fv, Quality: adapters.Good, Timestamp: at}
		b := batch.Batch{Endpoint: dev, Messages: []batch.Message{{Readings: []adapters.Reading{r, r}}, {Readings: []adapters.Reading{other}}}}
		for _, pf := range Formats() {
			doc, err := Build(pf, b, Options{MsgID: "v2_Ab3dEf9h_1", Now: func() time.Time { return at }})
			if err != nil {
				t.Fatalf("%s: %v", pf, err)
			}
			want, err := codec.AppendJSON(nil, doc)
			if err != nil {
				t.Fatalf("%s: %v", pf, err)
			}
			for _, c := range codec.Formats() {
				out, err := codec.Encode(doc, codec.EncodeOptions{Format: c})
				if err != nil {
					t.Fatalf("%s/%s: encode: %v", pf, c, err)
				}
				d, err := codec.Decode(out, codec.Limits{MaxDecodedSize: 1 << 24})
				if err != nil {
					t.Fatalf("%s/%s: decode: %v", pf, c, err)
				}
				got, err := codec.AppendJSON(nil, d.Value)
				if err != nil || string(got) != string(want) {
					t.Fatalf("%s/%s: round trip differs (%v)\n got %.300s\nwant %.300s", pf, c, err, got, want)
				}
			}
		}
	})
}
