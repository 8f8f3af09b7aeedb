package streamstore

import (
	"math"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseID(t *testing.T) {
	tests := []struct {
		in   string
		want ID
		ok   bool
	}{
		{"0-0", ID{}, true},
		{"0", ID{}, true},
		{"1526919030474-55", ID{1526919030474, 55}, true},
		{"1526919030474", ID{1526919030474, 0}, true},
		{"007-01", ID{7, 1}, true},
		{"18446744073709551615-18446744073709551615", MaxID, true},
		{"18446744073709551616-0", ID{}, false},
		{"1-18446744073709551616", ID{}, false},
		{"", ID{}, false},
		{"-", ID{}, false},
		{"+", ID{}, false},
		{"$", ID{}, false},
		{">", ID{}, false},
		{"1-", ID{}, false},
		{"-1", ID{}, false},
		{"1-2-3", ID{}, false},
		{"+1-2", ID{}, false},
		{" 1-2", ID{}, false},
		{"0x10-1", ID{}, false},
		{"1_000-1", ID{}, false},
		{"(1-2", ID{}, false},
	}
	for _, tt := range tests {
		got, err := ParseID(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseID(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestIDOrderAndArithmetic(t *testing.T) {
	a, b, c := ID{1, 5}, ID{1, 6}, ID{2, 0}
	if a.Compare(b) != -1 || b.Compare(a) != 1 || a.Compare(a) != 0 || b.Compare(c) != -1 {
		t.Error("Compare does not order by (ms, seq)")
	}
	if a.Next() != b {
		t.Errorf("Next(%v) = %v", a, a.Next())
	}
	if got := (ID{1, math.MaxUint64}).Next(); got != c {
		t.Errorf("Next carries into ms: got %v", got)
	}
	if c.Prev() != (ID{1, math.MaxUint64}) || MinID.Prev() != MinID || MaxID.Next() != MaxID {
		t.Error("Prev/Next at the edges")
	}
	if n, err := NextID("5-9"); err != nil || n != "5-10" {
		t.Errorf("NextID(5-9) = %q, %v", n, err)
	}
	if cmp, err := CompareIDs("10-0", "9-99"); err != nil || cmp != 1 {
		t.Errorf("CompareIDs compares numerically, not as strings: %d %v", cmp, err)
	}
	if _, err := CompareIDs("x", "1-1"); err == nil {
		t.Error("CompareIDs accepted a bad id")
	}
}

func TestIDTime(t *testing.T) {
	got, err := IDTime("1700000000123-4")
	if err != nil || !got.Equal(time.UnixMilli(1700000000123)) {
		t.Errorf("IDTime = %v, %v", got, err)
	}
	if _, err := IDTime("nope"); err == nil {
		t.Error("IDTime accepted a bad id")
	}
	if MaxID.Time().Before(time.Now()) {
		t.Error("MaxID.Time did not clamp to the far future")
	}
}

// FuzzParseID checks ParseID never panics, that whatever it accepts prints
// back canonically and reparses to the same id, and the arithmetic laws.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"0-0", "1-1", "1526919030474-55", "18446744073709551615-18446744073709551615", "12", "-", "1-", "00-00", "99999999999999999999-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			return
		}
		back, err := ParseID(id.String())
		if err != nil || back != id {
			t.Fatalf("ParseID(%q) = %v; String %q reparses to %v, %v", s, id, id.String(), back, err)
		}
		if id != MaxID {
			if n := id.Next(); n.Compare(id) != 1 || n.Prev() != id {
				t.Fatalf("Next(%v) = %v breaks order", id, n)
			}
		}
		if id != MinID {
			if p := id.Prev(); p.Compare(id) != -1 || p.Next() != id {
				t.Fatalf("Prev(%v) = %v breaks order", id, p)
			}
		}
		_ = id.Time()
	})
}
