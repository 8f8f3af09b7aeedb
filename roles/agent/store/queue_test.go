package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func newQueue(t testing.TB, s *Store, mutate func(*QueueOptions)) *Queue {
	t.Helper()
	o := DefaultQueueOptions()
	if mutate != nil {
		mutate(&o)
	}
	q, err := s.OfflineQueue(o)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// far is a time by which every queued record is ready.
var far = time.Now().Add(24 * time.Hour)

// queuedMsgIDs lists dest's queued msgIds in queue order.
func queuedMsgIDs(t testing.TB, q *Queue, dest int64) []string {
	t.Helper()
	recs, err := q.Ready(context.Background(), dest, 1<<30, far)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.MsgID
	}
	return ids
}

func stats(t testing.TB, q *Queue, dest int64) QueueStats {
	t.Helper()
	st, err := q.Stats(context.Background(), dest)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestQueueOverflow is the overflow case of issue 7: maxBufferRecords 1000,
// 1500 records offered, every tenth critical.
func TestQueueOverflow(t *testing.T) {
	const offered, limit = 1500, 1000
	critical := func(i int) bool { return i%10 == 9 }
	name := func(i int) string { return fmt.Sprintf("m-%04d", i) }
	// keep lists the records 0..n-1 without the first skipOrdinary
	// ordinary ones, then, with extraCritical, the critical ones after n.
	keep := func(n, skipOrdinary int, extraCritical bool) []string {
		var out []string
		for i := range n {
			if !critical(i) && skipOrdinary > 0 {
				skipOrdinary--
				continue
			}
			out = append(out, name(i))
		}
		if extraCritical {
			for i := n; i < offered; i++ {
				if critical(i) {
					out = append(out, name(i))
				}
			}
		}
		return out
	}
	tests := []struct {
		policy   DropPolicy
		want     []string // queued msgIds afterwards, in order
		errs     int      // Enqueue calls that returned ErrBufferFull
		counters QueueCounters
	}{
		// The 500 oldest ordinary records make room for the 500 newcomers.
		{DropOldest, keep(offered, 500, false), 0,
			QueueCounters{Enqueued: 1500, EvictedRecords: 500}},
		// The 450 ordinary newcomers are refused; each of the 50 critical
		// ones displaces the oldest ordinary record instead of being lost.
		{DropNewest, keep(limit, 50, true), 450,
			QueueCounters{Enqueued: 1050, EvictedRecords: 50, Refused: 450}},
		// Nothing queued is touched; every newcomer gets the error.
		{DropError, keep(limit, 0, false), 500,
			QueueCounters{Enqueued: 1000, FullErrors: 500}},
	}
	for _, tc := range tests {
		t.Run(string(tc.policy), func(t *testing.T) {
			ctx := context.Background()
			q := newQueue(t, open(t, t.TempDir()), func(o *QueueOptions) {
				o.MaxBufferRecords, o.DropPolicy = limit, tc.policy
			})
			errs := 0
			for i := range offered {
				_, err := q.Enqueue(ctx, 7, Record{MsgID: name(i), Topic: "t", Payload: []byte("x"), Critical: critical(i)})
				var full *FullError
				switch {
				case err == nil:
				case errors.As(err, &full) && errors.Is(err, ErrBufferFull) && full.Policy == tc.policy:
					errs++
				default:
					t.Fatalf("enqueue %d: %v", i, err)
				}
			}
			if errs != tc.errs {
				t.Errorf("%d full errors, want %d", errs, tc.errs)
			}
			got := queuedMsgIDs(t, q, 7)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("queued %d records, want %d; first %v, want %v", len(got), len(tc.want), got[:5], tc.want[:5])
			}
			for i := range offered {
				if critical(i) && (i < limit || tc.policy != DropError) && !slices.Contains(got, name(i)) {
					t.Errorf("critical record %s was dropped", name(i))
				}
			}
			st := stats(t, q, 7)
			if st.Counters != tc.counters {
				t.Errorf("counters = %+v, want %+v", st.Counters, tc.counters)
			}
			if st.Records != int64(len(tc.want)) || st.Bytes != int64(len(tc.want)) {
				t.Errorf("depth = %d records, %d bytes, want %d", st.Records, st.Bytes, len(tc.want))
			}
			c := st.Counters
			if dropped := c.EvictedRecords + c.EvictedBytes + c.Refused + c.FullErrors; dropped != offered-limit {
				t.Errorf("counters show %d drops, want %d", dropped, offered-limit)
			}
		})
	}
}

func TestQueueEvictionEdges(t *testing.T) {
	ctx := context.Background()
	t.Run("critical only under oldest", func(t *testing.T) {
		q := newQueue(t, open(t, t.TempDir()), func(o *QueueOptions) { o.MaxBufferRecords = 3 })
		for i := range 3 {
			if _, err := q.Enqueue(ctx, 1, Record{MsgID: fmt.Sprint("c", i), Payload: []byte("x"), Critical: true}); err != nil {
				t.Fatal(err)
			}
		}
		// An ordinary record never displaces a critical one.
		if _, err := q.Enqueue(ctx, 1, Record{MsgID: "o", Payload: []byte("x")}); !errors.Is(err, ErrBufferFull) {
			t.Fatalf("ordinary into a queue of critical records: err = %v", err)
		}
		// A critical one displaces the oldest critical one.
		if _, err := q.Enqueue(ctx, 1, Record{MsgID: "c3", Payload: []byte("x"), Critical: true}); err != nil {
			t.Fatal(err)
		}
		if got := queuedMsgIDs(t, q, 1); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
			t.Fatalf("queued %v", got)
		}
		want := QueueCounters{Enqueued: 4, EvictedRecords: 1, EvictedCritical: 1, Refused: 1}
		if c := stats(t, q, 1).Counters; c != want {
			t.Fatalf("counters = %+v, want %+v", c, want)
		}
	})
	t.Run("byte limit", func(t *testing.T) {
		q := newQueue(t, open(t, t.TempDir()), func(o *QueueOptions) { o.MaxBufferBytes = 100 })
		for i := range 3 {
			if _, err := q.Enqueue(ctx, 1, Record{MsgID: fmt.Sprint("b", i), Payload: make([]byte, 40)}); err != nil {
				t.Fatal(err)
			}
		}
		if got := queuedMsgIDs(t, q, 1); !slices.Equal(got, []string{"b1", "b2"}) {
			t.Fatalf("queued %v", got)
		}
		if _, err := q.Enqueue(ctx, 1, Record{MsgID: "huge", Payload: make([]byte, 101)}); !errors.Is(err, ErrRecordTooLarge) {
			t.Fatalf("oversized record: err = %v", err)
		}
		st := stats(t, q, 1)
		want := QueueCounters{Enqueued: 3, EvictedBytes: 1, Refused: 1}
		if st.Counters != want || st.Bytes != 80 || st.Records != 2 {
			t.Fatalf("stats = %+v, want counters %+v, 2 records of 80 bytes", st, want)
		}
	})
}

func TestQueueRetryAndDeadLetter(t *testing.T) {
	tests := []struct {
		maxRetries int
		waits      []time.Duration // before each retry; the next rejection dead-letters
	}{
		{0, nil},
		{1, []time.Duration{5 * time.Second}},
		{3, []time.Duration{5 * time.Second, 30 * time.Second, 5 * time.Minute}},
		{5, []time.Duration{5 * time.Second, 30 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint("maxRetries=", tc.maxRetries), func(t *testing.T) {
			ctx := context.Background()
			s := open(t, t.TempDir())
			q := newQueue(t, s, func(o *QueueOptions) { o.MaxRetries = tc.maxRetries })
			id, err := q.Enqueue(ctx, 2, Record{MsgID: "v2_k_1", Topic: "t", Payload: []byte("p"), Critical: true})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			for i, wait := range tc.waits {
				dead, err := q.Reject(ctx, 2, id, fmt.Sprint("nack ", i), now)
				if err != nil || dead {
					t.Fatalf("rejection %d: dead = %v, err = %v", i+1, dead, err)
				}
				if recs, _ := q.Ready(ctx, 2, 10, now.Add(wait-time.Millisecond)); len(recs) != 0 {
					t.Fatalf("rejection %d: ready before %v", i+1, wait)
				}
				now = now.Add(wait)
				recs, err := q.Ready(ctx, 2, 10, now)
				if err != nil || len(recs) != 1 || recs[0].Attempts != i+1 {
					t.Fatalf("rejection %d: ready after %v = %+v, %v", i+1, wait, recs, err)
				}
			}
			dead, err := q.Reject(ctx, 2, id, "nack final", now)
			if err != nil || !dead {
				t.Fatalf("last rejection: dead = %v, err = %v", dead, err)
			}
			if _, err := q.Reject(ctx, 2, id, "again", now); !errors.Is(err, ErrNotFound) {
				t.Fatalf("reject of a dead letter: err = %v", err)
			}
			var msgID, reason string
			var attempts int
			var payload []byte
			if err := s.db.ReadSQL().QueryRow(`SELECT msg_id, payload, attempts, reason FROM offline_dead_letters WHERE id = $1 AND destination = 2`, id).
				Scan(&msgID, &payload, &attempts, &reason); err != nil {
				t.Fatal(err)
			}
			if msgID != "v2_k_1" || string(payload) != "p" || attempts != tc.maxRetries+1 || reason != "nack final" {
				t.Fatalf("dead letter = %s %q attempts %d reason %q", msgID, payload, attempts, reason)
			}
			st := stats(t, q, 2)
			want := QueueCounters{Enqueued: 1, Rejected: int64(tc.maxRetries + 1), DeadLettered: 1}
			if st.Counters != want || st.Records != 0 || st.Bytes != 0 || st.DeadLetters != 1 {
				t.Fatalf("stats = %+v, want counters %+v, empty queue, 1 dead letter", st, want)
			}
		})
	}
}

func TestQueueReadyAckAndIsolation(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, open(t, t.TempDir()), nil)
	var ids []int64
	for i := range 10 {
		for _, dest := range []int64{1, 2} {
			id, err := q.Enqueue(ctx, dest, Record{MsgID: fmt.Sprintf("d%d-%d", dest, i), Topic: "t", Payload: []byte("abc")})
			if err != nil {
				t.Fatal(err)
			}
			if dest == 1 {
				ids = append(ids, id)
			}
		}
	}
	now := time.Now()
	recs, err := q.Ready(ctx, 1, 3, now)
	if err != nil || len(recs) != 3 || recs[0].MsgID != "d1-0" || recs[2].MsgID != "d1-2" {
		t.Fatalf("Ready(1, 3) = %+v, %v", recs, err)
	}
	// A rejected record leaves the ready set until its wait is over.
	if _, err := q.Reject(ctx, 1, ids[0], "nack", now); err != nil {
		t.Fatal(err)
	}
	if recs, _ := q.Ready(ctx, 1, 2, now); recs[0].MsgID != "d1-1" || recs[1].MsgID != "d1-2" {
		t.Fatalf("after reject: %+v", recs)
	}
	// Ack of another destination's ids, or of ids gone already, is a no-op.
	if n, err := q.Ack(ctx, 2, ids[1:3]); err != nil || n != 0 {
		t.Fatalf("Ack of destination 1's ids on 2 = %d, %v", n, err)
	}
	if n, err := q.Ack(ctx, 1, append(ids[1:3], ids[1], 1<<40)); err != nil || n != 2 {
		t.Fatalf("Ack = %d, %v", n, err)
	}
	got := queuedMsgIDs(t, q, 1)
	want := []string{"d1-0", "d1-3", "d1-4", "d1-5", "d1-6", "d1-7", "d1-8", "d1-9"}
	if !slices.Equal(got, want) {
		t.Fatalf("queued %v, want %v", got, want)
	}
	st := stats(t, q, 1)
	if st.Records != 8 || st.Bytes != 24 || st.Counters.Delivered != 2 || st.Counters.Rejected != 1 || st.Oldest.IsZero() {
		t.Fatalf("stats 1 = %+v", st)
	}
	if st2 := stats(t, q, 2); st2.Records != 10 || st2.Counters.Delivered != 0 {
		t.Fatalf("stats 2 = %+v", st2)
	}
	if st3 := stats(t, q, 3); st3 != (QueueStats{Destination: 3}) {
		t.Fatalf("stats of an unused destination = %+v", st3)
	}
}

func TestQueuePersistsAcrossReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := newQueue(t, s, nil)
	for i := range 5 {
		if _, err := q.Enqueue(ctx, 4, Record{MsgID: fmt.Sprint("r", i), Payload: []byte{byte(i), 0}, Critical: i == 2}); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := q.Ready(ctx, 4, 10, far)
	if _, err := q.Reject(ctx, 4, before[1].ID, "nack", time.Now()); err != nil {
		t.Fatal(err)
	}
	wantStats := stats(t, q, 4)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	q = newQueue(t, open(t, dir), nil)
	after, _ := q.Ready(ctx, 4, 10, far)
	if len(after) != 5 || after[1].Attempts != 1 || !after[2].Critical || string(after[4].Payload) != "\x04\x00" {
		t.Fatalf("after reopen: %+v", after)
	}
	gotStats := stats(t, q, 4)
	gotStats.OldestAgeMS, wantStats.OldestAgeMS = 0, 0
	if !gotStats.Oldest.Equal(wantStats.Oldest) || gotStats.Counters != wantStats.Counters || gotStats.Records != 5 {
		t.Fatalf("stats after reopen = %+v, before %+v", gotStats, wantStats)
	}
}

// TestQueueSurvivesKill enqueues from a child process, kills it with
// SIGKILL mid-stream and checks every record the child reported committed
// is there exactly once, in order, and the depth matches the rows.
func TestQueueSurvivesKill(t *testing.T) {
	if dir := killChildDir("TestQueueSurvivesKill"); dir != "" {
		queueKillChild(dir)
		return
	}
	dir := t.TempDir()
	committed := int(runAndKill(t, "TestQueueSurvivesKill", dir, 500))
	s := open(t, dir)
	if v, err := s.IntegrityCheck(context.Background()); err != nil || v != "ok" {
		t.Fatalf("integrity_check = %q, %v", v, err)
	}
	q := newQueue(t, s, nil)
	got := queuedMsgIDs(t, q, 9)
	if len(got) < committed {
		t.Fatalf("%d records after kill, child had committed %d", len(got), committed)
	}
	for i, id := range got {
		if want := fmt.Sprint("m-", i+1); id != want {
			t.Fatalf("record %d is %s, want %s (lost or duplicated)", i, id, want)
		}
	}
	st := stats(t, q, 9)
	if st.Records != int64(len(got)) || st.Counters.Enqueued != int64(len(got)) || st.Bytes != int64(len(got))*512 {
		t.Fatalf("stats %+v disagree with %d rows", st, len(got))
	}
}

func queueKillChild(dir string) {
	s, err := Open(context.Background(), dir, nil)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	q, err := s.OfflineQueue(DefaultQueueOptions())
	if err != nil {
		fmt.Println("queue:", err)
		os.Exit(1)
	}
	payload := []byte(strings.Repeat("p", 512))
	for i := 1; ; i++ {
		if _, err := q.Enqueue(context.Background(), 9, Record{MsgID: fmt.Sprint("m-", i), Topic: "t", Payload: payload}); err != nil {
			fmt.Println("enqueue:", err)
			os.Exit(1)
		}
		fmt.Println(i)
	}
}

// TestQueueConcurrent enqueues from several goroutines while another drains,
// and checks each record is delivered or still queued, exactly once.
func TestQueueConcurrent(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, open(t, t.TempDir()), nil)
	const writers, each = 6, 150
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := q.Enqueue(ctx, 1, Record{MsgID: fmt.Sprintf("w%d-%d", w, i), Payload: []byte("x")}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	delivered := map[string]int{}
	done := make(chan struct{})
	var drainErr error
	go func() {
		defer close(done)
		for {
			// Whether every record was enqueued is read before Ready: read
			// after an empty Ready, it could count a record enqueued in
			// between, and that record would be left undelivered.
			st, err := q.Stats(ctx, 1)
			if err != nil {
				drainErr = err
				return
			}
			all := st.Counters.Enqueued == writers*each
			recs, err := q.Ready(ctx, 1, 25, far)
			if err != nil {
				drainErr = err
				return
			}
			if len(recs) == 0 && all {
				return
			}
			ids := make([]int64, len(recs))
			for i, r := range recs {
				ids[i] = r.ID
				delivered[r.MsgID]++
			}
			if _, err := q.Ack(ctx, 1, ids); err != nil {
				drainErr = err
				return
			}
		}
	}()
	wg.Wait()
	<-done
	if drainErr != nil {
		t.Fatal(drainErr)
	}
	if len(delivered) != writers*each {
		t.Fatalf("%d distinct records delivered, want %d", len(delivered), writers*each)
	}
	for id, n := range delivered {
		if n != 1 {
			t.Fatalf("%s delivered %d times", id, n)
		}
	}
	if st := stats(t, q, 1); st.Records != 0 || st.Counters.Delivered != writers*each {
		t.Fatalf("stats = %+v", st)
	}
}

func TestQueueOptionsValidate(t *testing.T) {
	if err := DefaultQueueOptions().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	tests := []struct {
		field  string
		mutate func(*QueueOptions)
	}{
		{"flushBatchSize", func(o *QueueOptions) { o.FlushBatchSize = 0 }},
		{"flushIntervalMs", func(o *QueueOptions) { o.FlushIntervalMS = -1 }},
		{"maxRetries", func(o *QueueOptions) { o.MaxRetries = -1 }},
		{"maxBufferRecords", func(o *QueueOptions) { o.MaxBufferRecords = 0 }},
		{"maxBufferBytes", func(o *QueueOptions) { o.MaxBufferBytes = 0 }},
		{"dropPolicy", func(o *QueueOptions) { o.DropPolicy = "random" }},
		{"flushTriggerThreshold", func(o *QueueOptions) { o.FlushTriggerThreshold = 0 }},
		{"maxFlushPerCycle", func(o *QueueOptions) { o.MaxFlushPerCycle = 0 }},
		{"cleanupIntervalMs", func(o *QueueOptions) { o.CleanupIntervalMS = 0 }},
	}
	for _, tc := range tests {
		o := DefaultQueueOptions()
		tc.mutate(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v", tc.field, err)
		}
	}
}

// TestQueuePurge: purging one destination deletes its records, dead
// letters and counters and leaves the other destination's queue alone.
func TestQueuePurge(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	q := newQueue(t, s, func(o *QueueOptions) { o.MaxRetries = 0 })
	for dest := int64(1); dest <= 2; dest++ {
		for i := range 5 {
			if _, err := q.Enqueue(ctx, dest, Record{MsgID: fmt.Sprintf("v2_k_%d", i+1), Topic: "t", Payload: []byte("p")}); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := q.Ready(ctx, dest, 1, time.Now())
		if err != nil || len(recs) != 1 {
			t.Fatalf("ready: %v %v", recs, err)
		}
		if dead, err := q.Reject(ctx, dest, recs[0].ID, "refused", time.Now()); err != nil || !dead {
			t.Fatalf("reject: %v %v", dead, err)
		}
	}
	n, err := q.Purge(ctx, 1)
	if err != nil || n != 4 {
		t.Fatalf("purge: %d records, %v; want 4", n, err)
	}
	if st := stats(t, q, 1); st.Records != 0 || st.DeadLetters != 0 || st.Counters != (QueueCounters{}) {
		t.Fatalf("destination 1 after purge: %+v", st)
	}
	if st := stats(t, q, 2); st.Records != 4 || st.DeadLetters != 1 || st.Counters.Enqueued != 5 {
		t.Fatalf("destination 2 after purging 1: %+v", st)
	}
}
