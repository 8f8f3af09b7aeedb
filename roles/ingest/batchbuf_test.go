package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

const poolAgent = "0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11"

// poolEntries returns n entries of one device's readings; full gives every
// reading a unit, a quality, a timestamp and an anomaly score, and the
// message a protocol.
func poolEntries(n, readings int, device string, full bool) []streamstore.Entry {
	es := make([]streamstore.Entry, n)
	for i := range es {
		var rs []string
		for r := range readings {
			if full {
				rs = append(rs, fmt.Sprintf(`{"name":"m%d","value":%d,"unit":"C","quality":"GOOD","timestamp":%d,"anomalyScore":0.75}`, r, i, int64(1763805600000)+int64(i)))
			} else {
				rs = append(rs, fmt.Sprintf(`{"name":"m%d","value":null}`, r))
			}
		}
		proto := ""
		if full {
			proto = `"protocol":"modbus",`
		}
		data := `{"agentUuid":"` + poolAgent + `","deviceName":"` + device + `",` + proto + `"timestamp":1763805600000,"readings":[` + strings.Join(rs, ",") + `]}`
		es[i] = streamstore.Entry{ID: fmt.Sprintf("%d-0", i+1), Values: map[string]string{telemetry.StreamField: data}}
	}
	return es
}

// TestBatchPoolReusesReleasedBuffers: the buffer a released batch held is
// the next batch's, with the same arrays, and none of the first batch's
// values shows in the second batch's messages or rows.
func TestBatchPoolReusesReleasedBuffers(t *testing.T) {
	p := newBatchPool(1)
	ctx := context.Background()
	buf, _ := p.get(ctx)

	msgs, dead := decodeEntries(poolEntries(20, 10, "old", true), buf)
	if len(dead) != 0 || len(msgs) != 20 {
		t.Fatalf("first batch: %d messages, %d dead", len(msgs), len(dead))
	}
	rows := rowsOf("tenant-a", msgs, buf)
	if len(rows) != 200 || rows[0].Unit != "C" || rows[0].AnomalyScore == nil {
		t.Fatalf("first batch rows: %d, %+v", len(rows), rows[0])
	}
	p.put(buf)

	// Released: nothing of the batch is reachable from the buffer.
	for i, r := range buf.rows[:cap(buf.rows)] {
		if r != (telemetry.Row{}) {
			t.Fatalf("released buffer keeps row %d: %+v", i, r)
		}
	}
	kept := buf.msgs[:cap(buf.msgs)]
	for i := range kept {
		if m := &kept[i]; m.id != "" || m.payload != "" || m.msg.DeviceName != "" || m.msg.Readings != nil {
			t.Fatalf("released buffer keeps message %d: %+v", i, *m)
		}
	}

	again, _ := p.get(ctx)
	if again != buf {
		t.Fatal("the pool handed out another buffer than the released one")
	}
	arenaCap, rowsCap := again.arena.Cap(), cap(again.rows)
	msgs2, _ := decodeEntries(poolEntries(20, 10, "new", false), again)
	rows2 := rowsOf("tenant-b", msgs2, again)
	if again.arena.Cap() != arenaCap || again.arena.Len() != 200 {
		t.Errorf("second batch: arena %d of %d, want the first batch's %d readings reused", again.arena.Len(), again.arena.Cap(), arenaCap)
	}
	if cap(again.rows) != rowsCap || &rows2[0] != &again.rows[:1][0] {
		t.Error("second batch's rows are not in the released batch's row array")
	}
	for _, m := range msgs2 {
		for _, r := range m.msg.Readings {
			if r.Unit != "" || r.Quality != "" || r.Timestamp != nil || r.AnomalyScore != nil || r.Value != nil {
				t.Fatalf("reading of the second batch carries the first's values: %+v", r)
			}
		}
	}
	for _, r := range rows2 {
		if r.DeviceName != "new" || r.TenantID != "tenant-b" || r.Protocol != "" || r.Unit != "" || r.Quality != "" ||
			r.Value != nil || r.AnomalyScore != nil || !strings.HasPrefix(r.MetricName, "new.") {
			t.Fatalf("row of the second batch carries the first's values: %+v", r)
		}
	}
	p.put(again)
}

// TestBatchPoolBound: with every buffer out, get waits until one comes
// back, and gives up when its context ends.
func TestBatchPoolBound(t *testing.T) {
	p := newBatchPool(2)
	ctx := context.Background()
	a, _ := p.get(ctx)
	_, _ = p.get(ctx)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, ok := p.get(cctx); ok {
		t.Fatal("a third buffer out of a pool of two")
	}
	got := make(chan *batchBuf)
	go func() {
		b, _ := p.get(ctx)
		got <- b
	}()
	p.put(a)
	if b := <-got; b != a {
		t.Fatal("the waiting get did not receive the released buffer")
	}
}

func TestBatchesInFlight(t *testing.T) {
	cpus := runtime.GOMAXPROCS(0)
	tests := []struct {
		name string
		in   config.Ingest
		want int
	}{
		{"copy: one per write slot and one ahead, not per worker", config.Ingest{InsertMode: "copy", WorkerCount: 12}, cpus + 1},
		{"explicit write concurrency", config.Ingest{InsertMode: "copy", WorkerCount: 12, WriteConcurrency: 3}, 4},
		{"unbounded writes: the most workers", config.Ingest{InsertMode: "realtime", WorkerCount: 8, Autoscale: config.Autoscale{MaxWorkers: 20}}, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := batchesInFlight(tt.in); got != tt.want {
				t.Errorf("batchesInFlight = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestBatchBufDropsOversizedArrays: a batch far above the usual does not
// pin its arrays after it is released.
func TestBatchBufDropsOversizedArrays(t *testing.T) {
	b := newBatchBuf()
	b.rows = make([]telemetry.Row, keepRows+1)
	b.clean = false
	b.reset()
	if b.rows != nil {
		t.Fatalf("kept %d rows past the bound %d", cap(b.rows), keepRows)
	}
}

// TestCopyReader: the stream read in pieces of any size is the header,
// every row in order and the trailer, across several chunks; once closed,
// a read fails, and not with io.EOF, which would complete the COPY.
func TestCopyReader(t *testing.T) {
	v := 1.5
	rows := make([]telemetry.Row, 3000)
	for i := range rows {
		rows[i] = telemetry.Row{Time: time.Unix(int64(i), 0), MetricName: fmt.Sprintf("device-%04d.metric", i), Value: &v, Unit: "C", DeviceName: "device", TenantID: "t"}
		if i%3 == 0 {
			rows[i].Value, rows[i].AnomalyScore = nil, &v
		}
	}
	want := appendCopyHeader(nil)
	for i := range rows {
		want = appendCopyRow(want, &rows[i])
	}
	want = appendCopyTrailer(want)
	if len(want) < 3*copyChunk || string(want[:11]) != "PGCOPY\n\xff\r\n\x00" || !bytes.HasSuffix(want, []byte{0xff, 0xff}) {
		t.Fatalf("stream of %d bytes does not span chunks or lacks header or trailer", len(want))
	}
	for _, size := range []int{1, 7, 4096, 65536, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			r := &copyReader{rows: rows}
			var got []byte
			p := make([]byte, size)
			for {
				n, err := r.Read(p)
				got = append(got, p[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes in pieces of %d, want the %d-byte stream", len(got), size, len(want))
			}
		})
	}
	r := &copyReader{rows: rows}
	if _, err := r.Read(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	r.close()
	if n, err := r.Read(make([]byte, 100)); n != 0 || !errors.Is(err, errCopyClosed) {
		t.Fatalf("read after close = %d, %v; want errCopyClosed", n, err)
	}
}
