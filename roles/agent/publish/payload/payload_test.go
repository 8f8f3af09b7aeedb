package payload

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const testMsgID = "v2_Ab3dEf9h_1042"

var (
	t0       = time.Date(2026, 11, 24, 10, 0, 0, 123456789, time.UTC)
	tNow     = time.Date(2026, 11, 24, 10, 0, 5, 0, time.UTC)
	fixedNow = func() time.Time { return tNow }
)

func good(dev, metric string, v any, unit string, at time.Time) adapters.Reading {
	return adapters.Reading{DeviceName: dev, DeviceID: dev + "-id", Metric: metric, Value: v, Unit: unit,
		Timestamp: at, Quality: adapters.Good}
}

func bad(dev, metric, code string, at time.Time) adapters.Reading {
	return adapters.Reading{DeviceName: dev, DeviceID: dev + "-id", Metric: metric, Unit: "bar",
		Timestamp: at, Quality: adapters.Bad, QualityCode: code}
}

// fixture is a batch of two polls of one Modbus device plus an OPC-UA
// reading of another device, with every value type and a failed read.
func fixture() batch.Batch {
	opc := good("opc-server", "flow", 12.25, "m3/h", t0.Add(300*time.Millisecond))
	opc.Protocol, opc.NodeType = "opcua", "Double"
	return batch.Batch{Endpoint: "Line 1/PLC", Reason: batch.ReasonSize, Messages: []batch.Message{
		{Endpoint: "Line 1/PLC", Received: t0.Add(time.Second), Readings: []adapters.Reading{
			good("plc-1", "temperature", 21.5, "C", t0),
			good("plc-1", "count", int64(42), "", t0),
			good("plc-1", "running", true, "", t0),
			bad("plc-1", "pressure", "TIMEOUT", t0),
			good("plc-1", "mode", "auto", "", t0),
			good("plc-1", "ratio", float32(0.1), "", t0),
			good("plc-1", "total", uint64(math.MaxUint64), "kWh", t0),
			good("plc-1", "label", nil, "", time.Time{}), // no timestamp: takes Received
		}},
		{Endpoint: "Line 1/PLC", Received: t0.Add(2 * time.Second), Readings: []adapters.Reading{
			good("plc-1", "temperature", 22.0, "C", t0.Add(time.Second)),
			good("plc-1", "pressure", 1.5, "bar", t0.Add(time.Second)),
			opc,
		}},
	}}
}

func opts() Options {
	return Options{Protocol: "modbus", MsgID: testMsgID, Now: fixedNow}
}

func mustBuild(t *testing.T, f Format, b batch.Batch, o Options) map[string]any {
	t.Helper()
	doc, err := Build(f, b, o)
	if err != nil {
		t.Fatalf("Build %s: %v", f, err)
	}
	return doc
}

func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := codec.AppendJSON(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGolden holds every format, in every compression, to the bytes in
// testdata/. codec's output is deterministic (sorted keys, fixed deflate
// level), so the deflated files are stable too as long as the vendored
// compressor is; regenerate with -update after a deliberate change.
func TestGolden(t *testing.T) {
	for _, f := range Formats() {
		doc := mustBuild(t, f, fixture(), opts())
		for _, c := range codec.Formats() {
			t.Run(string(f)+"/"+string(c), func(t *testing.T) {
				got, err := codec.Encode(doc, codec.EncodeOptions{Format: c})
				if err != nil {
					t.Fatal(err)
				}
				golden(t, filepath.Join("testdata", string(f)+"."+string(c)), got)
			})
		}
	}
	t.Run("heartbeat", func(t *testing.T) {
		got, err := EncodeHeartbeat(testHeartbeat())
		if err != nil {
			t.Fatal(err)
		}
		golden(t, filepath.Join("testdata", "heartbeat.json"), got)
	})
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update after a deliberate change)\n got: %.400q\nwant: %.400q", path, got, want)
	}
}

func testHeartbeat() Heartbeat {
	return Heartbeat{Endpoint: "Line 1/PLC", Timestamp: tNow, State: StateConnected, Stats: HeartbeatStats{
		MessagesReceived: 1200, MessagesPublished: 300, BytesReceived: 48000, BytesPublished: 96000,
		ReconnectAttempts: 2, LastPublishTime: t0, LastConnectedTime: t0.Add(-time.Hour),
	}}
}

// TestDecodeGivesBackTheDocument checks that codec.Decode of every format
// in every compression, through the Compressor, yields the built document.
func TestDecodeGivesBackTheDocument(t *testing.T) {
	big := fixture()
	for i := range 60 {
		big.Messages = append(big.Messages, batch.Message{Readings: []adapters.Reading{
			good("plc-2", "r"+strings.Repeat("x", i%7), float64(i)/3, "V", t0.Add(time.Duration(i)*time.Millisecond)),
		}})
	}
	for _, b := range []batch.Batch{fixture(), big, {Endpoint: "empty"}} {
		for _, f := range Formats() {
			doc := mustBuild(t, f, b, opts())
			want := canonical(t, doc)
			for _, c := range codec.Formats() {
				comp, err := NewCompressor(c, func() float64 { return 10 })
				if err != nil {
					t.Fatal(err)
				}
				out, used, err := comp.Encode(doc)
				if err != nil {
					t.Fatalf("%s/%s: %v", f, c, err)
				}
				d, err := codec.Decode(out, codec.Limits{})
				if err != nil {
					t.Fatalf("%s/%s: Decode: %v", f, c, err)
				}
				if got := canonical(t, d.Value); got != want {
					t.Errorf("%s/%s (%d readings): decoded document differs\n got %.300s\nwant %.300s", f, c, b.Readings(), got, want)
				}
				if d.Layers.Encoding != used.Encoding() || (d.Layers.Deflate != "") != used.Deflated() {
					t.Errorf("%s/%s: layers %v, Encode said %s", f, c, d.Layers, used)
				}
			}
		}
	}
	hb, err := EncodeHeartbeat(testHeartbeat())
	if err != nil {
		t.Fatal(err)
	}
	d, err := codec.Decode(hb, codec.Limits{})
	if err != nil || d.Layers != (codec.Layers{Encoding: codec.EncodingJSON}) {
		t.Fatalf("heartbeat: %v, layers %v", err, d.Layers)
	}
	doc, _ := testHeartbeat().Document()
	if canonical(t, d.Value) != canonical(t, doc) {
		t.Error("heartbeat decodes to another document")
	}
}

func TestCustom(t *testing.T) {
	doc := mustBuild(t, Custom, fixture(), opts())
	if doc["timestamp"] != "2026-11-24T10:00:05Z" || doc["protocol"] != "modbus" || doc["msgId"] != testMsgID {
		t.Errorf("envelope: %v %v %v", doc["timestamp"], doc["protocol"], doc["msgId"])
	}
	msgs := doc["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	r0 := msgs[0].(map[string]any)["readings"].([]any)
	first := r0[0].(map[string]any)
	want := map[string]any{"deviceName": "plc-1", "deviceId": "plc-1-id", "metric": "temperature", "value": 21.5,
		"unit": "C", "timestamp": "2026-11-24T10:00:00.123456789Z", "quality": "GOOD"}
	if canonical(t, first) != canonical(t, want) {
		t.Errorf("reading %v, want %v", first, want)
	}
	if got := r0[5].(map[string]any)["value"]; got != 0.1 {
		t.Errorf("float32 0.1 became %v", got)
	}
	if got := r0[6].(map[string]any)["value"]; got != uint64(math.MaxUint64) {
		t.Errorf("max uint64 became %v (%T)", got, got)
	}
	if got := r0[7].(map[string]any)["timestamp"]; got != "2026-11-24T10:00:01.123456789Z" {
		t.Errorf("reading without timestamp: %v, want the message's receive time", got)
	}
	opc := msgs[1].(map[string]any)["readings"].([]any)[2].(map[string]any)
	if opc["protocol"] != "opcua" || opc["nodeType"] != "Double" {
		t.Errorf("OPC-UA reading lost its metadata: %v", opc)
	}
	if _, ok := first["protocol"]; ok {
		t.Error("a Modbus reading carries protocol")
	}

	for _, id := range []string{"", "v1_x_1", "v2_short_1", "v2_Ab3dEf9h_01"} {
		o := opts()
		o.MsgID = id
		if _, err := Build(Custom, fixture(), o); !errors.Is(err, ErrMsgID) {
			t.Errorf("msgId %q: err %v", id, err)
		}
	}
}

// TestBadReads follows the formats' table for a failed read
// (docs/agent-payloads.md), with
// and without a quality code from the adapter.
func TestBadReads(t *testing.T) {
	for _, code := range []string{"TIMEOUT", "CONNECTION_REFUSED", "HOST_NOT_FOUND", "DEVICE_OFFLINE", "DEVICE_BUSY", "BAD_DATA", "READ_ERROR", ""} {
		wantCode := code
		if code == "" {
			wantCode = CodeReadError
		}
		r := bad("plc-1", "pressure", code, t0)
		r.Value = 3.0 // a stale value an adapter left behind must not travel
		b := batch.Batch{Endpoint: "ep", Messages: []batch.Message{{Readings: []adapters.Reading{r}}}}
		cases := []struct {
			f    Format
			list string
			want string // canonical JSON of the list
		}{
			{Custom, "", `{"deviceId":"plc-1-id","deviceName":"plc-1","metric":"pressure","quality":"BAD","qualityCode":"` + wantCode + `","timestamp":"2026-11-24T10:00:00.123456789Z","unit":"bar","value":null}`},
			{Tags, "tags", `[{"error":"` + wantCode + `","name":"pressure"}]`},
			{ECP, "tags", `[]`},
			{ML, "features", `[{"dtype":"error","error":"` + wantCode + `","name":"pressure","quality":"BAD","value":null}]`},
		}
		for _, c := range cases {
			t.Run(string(c.f)+"/"+wantCode, func(t *testing.T) {
				doc := mustBuild(t, c.f, b, opts())
				var got any
				if c.f == Custom {
					got = doc["messages"].([]any)[0].(map[string]any)["readings"].([]any)[0]
				} else {
					got = doc[c.list]
				}
				if s := canonical(t, got); s != c.want {
					t.Errorf("got  %s\nwant %s", s, c.want)
				}
			})
		}
	}
}

func TestNullValues(t *testing.T) {
	r := good("dev", "label", nil, "", t0)
	nan := good("dev", "nan", math.NaN(), "", t0)
	b := batch.Batch{Endpoint: "ep", Messages: []batch.Message{{Readings: []adapters.Reading{r, nan}}}}
	cases := map[Format]string{
		Tags: `[{"name":"label","value":null},{"name":"nan","value":null}]`,
		ECP:  `[]`,
		ML: `[{"dtype":"error","error":"NULL_VALUE","name":"label","quality":"GOOD","value":null},` +
			`{"dtype":"error","error":"NULL_VALUE","name":"nan","quality":"GOOD","value":null}]`,
	}
	for f, want := range cases {
		doc := mustBuild(t, f, b, opts())
		key := "tags"
		if f == ML {
			key = "features"
		}
		if got := canonical(t, doc[key]); got != want {
			t.Errorf("%s: got %s\nwant %s", f, got, want)
		}
	}
	doc := mustBuild(t, Custom, b, opts())
	rs := doc["messages"].([]any)[0].(map[string]any)["readings"].([]any)
	for _, x := range rs {
		if m := x.(map[string]any); m["value"] != nil || m["quality"] != "GOOD" {
			t.Errorf("custom null reading: %v", m)
		}
	}
}

func TestECP(t *testing.T) {
	type obj = map[string]any
	rs := []adapters.Reading{
		good("d", "t", 1.0, "", t0.Add(2*time.Second)),
		good("d", "t", 2.0, "", t0.Add(time.Second)),   // older: loses
		good("d", "t", 3.0, "", t0.Add(2*time.Second)), // tie: the later one wins
		good("d", "on", true, "", t0),
		good("d", "n", int32(-7), "", t0),
		good("d", "u", uint16(65535), "", t0),
		good("d", "f32", float32(2.5), "", t0),
		good("d", "s", "auto", "", t0),
		good("d", "obj", obj{"a": 1}, "", t0),
		good("d", "gone", 5.0, "", t0),
		bad("d", "gone", "TIMEOUT", t0.Add(time.Second)), // latest read failed: tag omitted
		bad("d", "back", "TIMEOUT", t0),
		good("d", "back", 6.0, "", t0.Add(time.Second)), // recovered: kept
		good("d", "null", nil, "", t0),
	}
	b := batch.Batch{Endpoint: "ep", Messages: []batch.Message{{Readings: rs[:5]}, {Readings: rs[5:]}}}
	doc := mustBuild(t, ECP, b, opts())
	want := `[{"name":"t","type":3,"value":3},{"name":"on","type":1,"value":true},{"name":"n","type":2,"value":-7},` +
		`{"name":"u","type":2,"value":65535},{"name":"f32","type":3,"value":2.5},{"name":"s","type":4,"value":"auto"},` +
		`{"name":"obj","type":4,"value":"{\"a\":1}"},{"name":"back","type":3,"value":6}]`
	if got := canonical(t, doc["tags"]); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if doc["timestamp"] != t0.Add(2*time.Second).UnixMilli() || doc["node"] != "d" || doc["group"] != "ep" {
		t.Errorf("header %v %v %v", doc["timestamp"], doc["node"], doc["group"])
	}
}

func TestMLDTypes(t *testing.T) {
	cases := []struct {
		v     any
		dtype string
		value any
	}{
		{true, DTypeBool, true},
		{int8(-3), DTypeInt, int64(-3)},
		{uint32(7), DTypeInt, int64(7)},
		{uint64(math.MaxUint64), DTypeInt, uint64(math.MaxUint64)},
		{21.5, DTypeFloat, 21.5},
		{float32(0.1), DTypeFloat, 0.1},
		{math.Inf(1), DTypeError, nil},
		{"auto", DTypeString, "auto"},
		{[]any{1, 2}, DTypeString, "[1,2]"},
		{nil, DTypeError, nil},
	}
	var rs []adapters.Reading
	for _, c := range cases {
		rs = append(rs, good("d", "m", c.v, "", t0))
	}
	rs = append(rs, bad("d", "m", "DEVICE_BUSY", t0))
	doc := mustBuild(t, ML, batch.Batch{Endpoint: "ep", Messages: []batch.Message{{Readings: rs}}}, opts())
	if doc["schema"] != SchemaML {
		t.Errorf("schema %v", doc["schema"])
	}
	feats := doc["features"].([]any)
	if len(feats) != len(rs) {
		t.Fatalf("%d features for %d readings: ml keeps every reading", len(feats), len(rs))
	}
	for i, c := range cases {
		f := feats[i].(map[string]any)
		if f["dtype"] != c.dtype || f["value"] != c.value {
			t.Errorf("%T %v: dtype %v value %v (%T), want %s %v", c.v, c.v, f["dtype"], f["value"], f["value"], c.dtype, c.value)
		}
		if _, hasErr := f["error"]; hasErr != (c.dtype == DTypeError) {
			t.Errorf("%T %v: error field present = %v", c.v, c.v, hasErr)
		}
	}
	last := feats[len(feats)-1].(map[string]any)
	if last["dtype"] != DTypeError || last["error"] != "DEVICE_BUSY" || last["quality"] != "BAD" {
		t.Errorf("BAD feature %v", last)
	}
}

func TestTags(t *testing.T) {
	doc := mustBuild(t, Tags, fixture(), opts())
	// Two devices in the batch: the node is the endpoint and tag names
	// carry the device.
	if doc["node"] != "Line 1/PLC" || doc["group"] != "line_1_plc" {
		t.Errorf("node %v group %v", doc["node"], doc["group"])
	}
	if doc["timestamp"] != t0.Add(time.Second).UnixMilli() {
		t.Errorf("timestamp %v, want the newest reading's", doc["timestamp"])
	}
	tags := doc["tags"].([]any)
	if n := fixture().Readings(); len(tags) != n {
		t.Fatalf("%d tags for %d readings", len(tags), n)
	}
	if got := canonical(t, tags[0]); got != `{"name":"plc-1.temperature","value":21.5}` {
		t.Errorf("first tag %s", got)
	}
	if got := canonical(t, tags[3]); got != `{"error":"TIMEOUT","name":"plc-1.pressure"}` {
		t.Errorf("BAD tag %s", got)
	}
}

func TestNodeAndGroup(t *testing.T) {
	one := func(devs ...string) batch.Batch {
		var rs []adapters.Reading
		for _, d := range devs {
			rs = append(rs, good(d, "m", 1, "", t0))
		}
		return batch.Batch{Messages: []batch.Message{{Readings: rs}}}
	}
	nodes := []struct {
		b    batch.Batch
		want string
	}{
		{one("plc-1", "plc-1"), "plc-1"},
		{one("plc-1", "", "plc-1"), "plc-1"},
		{one("", ""), "ep"},
		{one("plc-1", "plc-2"), "ep"},
		{batch.Batch{}, "ep"},
	}
	for _, c := range nodes {
		if got := Node(c.b, "ep"); got != c.want {
			t.Errorf("Node(%v) = %q, want %q", c.b.Messages, got, c.want)
		}
	}
	groups := map[string]string{
		"Line 1/PLC": "line_1_plc", "line-1": "line_1", "  Boiler..Room  ": "boiler_room",
		"plc": "plc", "": "default", "///": "default", "Größe 2": "gr_e_2",
	}
	for in, want := range groups {
		if got := Group(in); got != want {
			t.Errorf("Group(%q) = %q, want %q", in, got, want)
		}
	}
	// Options.Endpoint overrides the batch's.
	doc := mustBuild(t, Tags, one("", ""), Options{Endpoint: "Other EP", Now: fixedNow})
	if doc["node"] != "Other EP" || doc["group"] != "other_ep" {
		t.Errorf("node %v group %v", doc["node"], doc["group"])
	}
	// No readings: the payload time is now.
	if doc := mustBuild(t, ML, batch.Batch{Endpoint: "e"}, opts()); doc["timestamp"] != tNow.UnixMilli() {
		t.Errorf("empty batch timestamp %v", doc["timestamp"])
	}
}

func TestParse(t *testing.T) {
	for _, s := range []string{"", "custom", "tags", "ecp", "ml"} {
		f, err := ParseFormat(s)
		if err != nil || (s == "" && f != Custom) || (s != "" && string(f) != s) {
			t.Errorf("ParseFormat(%q) = %q, %v", s, f, err)
		}
	}
	for _, s := range []string{"", "json", "msgpack", "json+deflate", "msgpack+deflate"} {
		f, err := ParseCompression(s)
		if err != nil || (s == "" && f != codec.FormatJSON) || (s != "" && string(f) != s) {
			t.Errorf("ParseCompression(%q) = %q, %v", s, f, err)
		}
	}
	var fe *adapters.FieldError
	for _, s := range []string{"Custom", "csv", " tags"} {
		if _, err := ParseFormat(s); !errors.As(err, &fe) || fe.Field != "payload_format" || !strings.Contains(err.Error(), "custom, tags, ecp, ml") {
			t.Errorf("ParseFormat(%q) err %v", s, err)
		}
		if _, err := Build(Format(s), fixture(), opts()); s != "" && err == nil {
			t.Errorf("Build(%q) accepted", s)
		}
	}
	for _, s := range []string{"gzip", "JSON", "deflate"} {
		if _, err := ParseCompression(s); !errors.As(err, &fe) || fe.Field != "compression" {
			t.Errorf("ParseCompression(%q) err %v", s, err)
		}
		if _, err := NewCompressor(codec.Format(s), nil); !errors.As(err, &fe) {
			t.Errorf("NewCompressor(%q) err %v", s, err)
		}
	}
}

func TestHeartbeat(t *testing.T) {
	doc, err := testHeartbeat().Document()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"endpoint":"Line 1/PLC","state":"CONNECTED","stats":{"bytesPublished":96000,"bytesReceived":48000,` +
		`"lastConnectedTime":"2026-11-24T09:00:00.123456789Z","lastHeartbeatTime":null,"lastPublishTime":"2026-11-24T10:00:00.123456789Z",` +
		`"messagesPublished":300,"messagesReceived":1200,"reconnectAttempts":2},"timestamp":"2026-11-24T10:00:05Z"}`
	if got := canonical(t, doc); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	h := testHeartbeat()
	h.State = "connected"
	if _, err := EncodeHeartbeat(h); err == nil {
		t.Error("lower-case state accepted")
	}
}
