package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// Outcomes of one request, as the tables below name them.
const (
	appended  = "appended"
	duplicate = "duplicate"
	full      = "stream full"
	failed    = "error"
)

func outcome(res streamstore.ProduceResult, err error) string {
	switch {
	case errors.Is(err, streamstore.ErrStreamFull):
		return full
	case err != nil:
		return failed
	case res.Duplicate:
		return duplicate
	}
	return appended
}

// batchStep is one request of a table, its names symbolic so that rows can
// share a stream or a mark; each entry is {"req": label, "i": index}.
type batchStep struct {
	stream  string
	key     string // the mark's name; "" for none
	bitmap  bool
	bit     uint16
	entries int  // 1 when 0
	noField bool // an entry without fields follows: the request is invalid
	maxLen  int64
	want    string
}

func (st batchStep) request(name func(string) string, label string) streamstore.ProduceRequest {
	req := streamstore.ProduceRequest{Stream: name(st.stream), DedupTTL: time.Hour, DedupBitmap: st.bitmap, DedupBit: st.bit, MaxLen: st.maxLen}
	if st.key != "" {
		req.DedupKey = name(st.key)
	}
	for j := range max(st.entries, 1) {
		req.Entries = append(req.Entries, map[string]string{"req": label, "i": strconv.Itoa(j)})
	}
	if st.noField {
		req.Entries = append(req.Entries, map[string]string{})
	}
	return req
}

// produceEach produces reqs one by one, the behaviour ProduceBatch must
// match.
func (e *env) produceEach(ctx context.Context, reqs []streamstore.ProduceRequest) ([]streamstore.ProduceResult, []error) {
	results, errs := make([]streamstore.ProduceResult, len(reqs)), make([]error, len(reqs))
	for i, req := range reqs {
		results[i], errs[i] = e.st.Produce(ctx, req)
	}
	return results, errs
}

// produceBatch runs ProduceBatch and checks the shape of its answer.
func (e *env) produceBatch(ctx context.Context, reqs []streamstore.ProduceRequest) ([]streamstore.ProduceResult, []error) {
	e.t.Helper()
	results, errs := e.st.ProduceBatch(ctx, reqs)
	if len(results) != len(reqs) || len(errs) != len(reqs) {
		e.t.Fatalf("ProduceBatch of %d requests = %d results and %d errors", len(reqs), len(results), len(errs))
	}
	return results, errs
}

// testProduceBatch: a batch does what Produce does request by request:
// each request sees the marks and the appends of the ones before it (so
// copies of one message append once, and MaxLen counts the earlier
// appends), a request refused or invalid fails alone and leaves no mark,
// and the ids come back in the order the entries sit in the streams.
func testProduceBatch(t *testing.T, e *env) {
	cases := []struct {
		name   string
		before []batchStep // produced one by one before the batch
		batch  []batchStep
	}{
		{"independent requests", nil, []batchStep{
			{stream: "s", want: appended},
			{stream: "s", key: "m1", entries: 3, want: appended},
			{stream: "t", key: "m2", want: appended},
			{stream: "s", key: "seq", bitmap: true, bit: 3, entries: 2, want: appended},
			{stream: "t", maxLen: 10, want: appended},
			{stream: "s", key: "seq", bitmap: true, bit: 4, want: appended},
		}},
		{"copies by key", nil, []batchStep{
			{stream: "s", key: "m", want: appended},
			{stream: "s", key: "m", want: duplicate},
			{stream: "s", key: "other", want: appended},
			{stream: "t", key: "m", want: duplicate}, // the mark, not the stream, decides
		}},
		{"copies by bit", nil, []batchStep{
			{stream: "s", key: "seq", bitmap: true, bit: 5, want: appended},
			{stream: "s", key: "seq", bitmap: true, bit: 5, entries: 2, want: duplicate},
			{stream: "s", key: "seq", bitmap: true, bit: 6, want: appended},
			{stream: "s", key: "seq-older", bitmap: true, bit: 5, want: appended},
			{stream: "s", key: "seq", bitmap: true, bit: 6, want: duplicate},
		}},
		{"marked before the batch", []batchStep{
			{stream: "s", key: "m", want: appended},
			{stream: "s", key: "seq", bitmap: true, bit: 1, want: appended},
		}, []batchStep{
			{stream: "s", key: "m", want: duplicate},
			{stream: "s", key: "seq", bitmap: true, bit: 1, want: duplicate},
			{stream: "s", key: "seq", bitmap: true, bit: 2, want: appended},
		}},
		{"stream full in the middle", nil, []batchStep{
			{stream: "s", entries: 2, want: appended},
			{stream: "s", key: "m", entries: 2, maxLen: 3, want: full}, // 2 + 2 > 3
			{stream: "s", want: appended},
			{stream: "s", key: "m", want: appended}, // the refused copy left no mark
			{stream: "t", key: "seq", bitmap: true, bit: 9, maxLen: 1, want: appended},
			{stream: "t", key: "seq", bitmap: true, bit: 8, maxLen: 1, want: full},
			{stream: "t", key: "seq", bitmap: true, bit: 8, want: appended},
		}},
		{"entry without fields in the middle", nil, []batchStep{
			{stream: "s", key: "m", want: appended},
			{stream: "s", key: "bad", entries: 2, noField: true, want: failed},
			{stream: "s", key: "bad", want: appended}, // nothing of the invalid request was written
			{stream: "s", key: "m", want: duplicate},
		}},
	}
	for ci, tc := range cases {
		for _, mode := range []string{"ProduceBatch", "Produce"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				name := func(s string) string { return e.name(fmt.Sprintf("%d-%s-%s", ci, mode, s)) }
				// want lists, per stream, the labels of the requests whose
				// entries it must hold, in order, and their ids.
				want := map[string][]string{}
				wantIDs := map[string][]string{}
				for i, st := range tc.before {
					label := fmt.Sprint("before-", i)
					res, err := e.st.Produce(e.ctx, st.request(name, label))
					if got := outcome(res, err); got != st.want {
						t.Fatalf("before %d: Produce = %s (%v), want %s", i, got, err, st.want)
					}
					want[st.stream] = append(want[st.stream], label)
					wantIDs[st.stream] = append(wantIDs[st.stream], res.IDs...)
				}
				reqs := make([]streamstore.ProduceRequest, len(tc.batch))
				for i, st := range tc.batch {
					reqs[i] = st.request(name, strconv.Itoa(i))
				}
				var results []streamstore.ProduceResult
				var errs []error
				if mode == "Produce" {
					results, errs = e.produceEach(e.ctx, reqs)
				} else {
					results, errs = e.produceBatch(e.ctx, reqs)
				}
				for i, st := range tc.batch {
					res, err := results[i], errs[i]
					if got := outcome(res, err); got != st.want {
						t.Errorf("request %d: %s (%+v, %v), want %s", i, got, res, err, st.want)
						continue
					}
					switch st.want {
					case appended:
						if len(res.IDs) != len(reqs[i].Entries) {
							t.Errorf("request %d: %d ids for %d entries", i, len(res.IDs), len(reqs[i].Entries))
						}
						want[st.stream] = append(want[st.stream], strconv.Itoa(i))
						wantIDs[st.stream] = append(wantIDs[st.stream], res.IDs...)
					case duplicate:
						if len(res.IDs) != 0 {
							t.Errorf("request %d: a duplicate returned ids %v", i, res.IDs)
						}
					}
				}
				for _, stream := range slices.Sorted(maps.Keys(want)) {
					entries := e.rangeAll(name(stream))
					if got := ids(entries); !slices.Equal(got, wantIDs[stream]) {
						t.Errorf("stream %s holds ids %v; the results returned %v", stream, got, wantIDs[stream])
					}
					var labels []string
					for _, en := range entries {
						if en.Values["i"] == "0" {
							labels = append(labels, en.Values["req"])
						}
					}
					if !slices.Equal(labels, want[stream]) {
						t.Errorf("stream %s holds the entries of requests %q, want %q in that order", stream, labels, want[stream])
					}
				}
			})
		}
	}
}

// testProduceBatchPublishes: each appended request publishes its payload,
// in request order; a duplicate, a refused and an invalid request publish
// nothing.
func testProduceBatchPublishes(t *testing.T, e *env) {
	stream, fullStream, ch := e.name("ingest"), e.name("full"), e.name("live")
	e.add(fullStream, 1)
	sub, err := e.st.Subscribe(e.ctx, ch)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	req := func(key, payload string) streamstore.ProduceRequest {
		return streamstore.ProduceRequest{DedupKey: key, DedupTTL: time.Hour, Stream: stream,
			Entries: []map[string]string{{"data": payload}}, Channel: ch, Payload: []byte(payload)}
	}
	m1, m2 := e.name("msgid-1"), e.name("msgid-2")
	refused := req(e.name("msgid-3"), "refused")
	refused.Stream, refused.MaxLen = fullStream, 1
	invalid := req(e.name("msgid-4"), "invalid")
	invalid.Entries = []map[string]string{{}}
	quiet := req(e.name("msgid-5"), "quiet")
	quiet.Channel = ""
	reqs := []streamstore.ProduceRequest{
		req(m1, "a"), req(m1, "a-copy"), refused, req("", "b"), invalid, quiet, req(m2, "c"),
	}
	want := []string{appended, duplicate, full, appended, failed, appended, appended}
	results, errs := e.produceBatch(e.ctx, reqs)
	for i := range reqs {
		if got := outcome(results[i], errs[i]); got != want[i] {
			t.Fatalf("request %d: %s (%v), want %s", i, got, errs[i], want[i])
		}
	}
	// A marker published after the batch ends the wait: messages of one
	// channel arrive in publication order.
	if err := e.st.Publish(e.ctx, ch, []byte("end")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	var got []string
	for len(got) == 0 || got[len(got)-1] != "end" {
		select {
		case m := <-sub.C():
			got = append(got, string(m.Payload))
		case <-time.After(wait):
			t.Fatalf("received %q, never the end marker", got)
		}
	}
	if w := []string{"a", "b", "c", "end"}; !slices.Equal(got, w) {
		t.Errorf("published %q, want %q", got, w)
	}
}

// testProduceBatchEmpty: an empty batch is no error and has no results.
func testProduceBatchEmpty(t *testing.T, e *env) {
	for _, reqs := range [][]streamstore.ProduceRequest{nil, {}} {
		results, errs := e.st.ProduceBatch(e.ctx, reqs)
		if len(results) != 0 || len(errs) != 0 {
			t.Errorf("ProduceBatch(%#v) = %v, %v; want nothing", reqs, results, errs)
		}
	}
}

// testProduceBatchCanceled: with a cancelled ctx every request fails with
// ctx's error and nothing is written.
func testProduceBatchCanceled(t *testing.T, e *env) {
	stream, key, bitmap := e.name("ingest"), e.name("msgid"), e.name("seq")
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	entries := []map[string]string{{"data": "x"}}
	reqs := []streamstore.ProduceRequest{
		{Stream: stream, Entries: entries},
		{Stream: stream, Entries: entries, DedupKey: key, DedupTTL: time.Hour},
		{Stream: stream, Entries: entries, DedupKey: bitmap, DedupTTL: time.Hour, DedupBitmap: true, DedupBit: 1},
	}
	_, errs := e.produceBatch(ctx, reqs)
	for i, err := range errs {
		if !isCanceled(err) {
			t.Errorf("request %d with a cancelled ctx: %v, want context.Canceled", i, err)
		}
	}
	if n := e.length(stream); n != 0 {
		t.Errorf("a cancelled ProduceBatch appended: Len = %d", n)
	}
	for _, k := range []string{key, bitmap} {
		if ok, err := e.st.SetNX(e.ctx, k, "probe", time.Minute); !ok || err != nil {
			t.Errorf("a cancelled ProduceBatch left the mark %s (SetNX = %v, %v)", k, ok, err)
		}
	}
}
