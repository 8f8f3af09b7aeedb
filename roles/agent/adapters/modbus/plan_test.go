package modbus

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

func TestPlanBlocks(t *testing.T) {
	type dp = adapters.DataPoint
	tests := []struct {
		name string
		conn string
		dps  []dp
		want []string // "area unit start+count: names"
	}{
		{
			name: "contiguous and gap within maxGap merge",
			conn: `{"host":"h","maxGap":4}`,
			dps: []dp{
				{Name: "c", Register: "hr:7", Type: "float32"},
				{Name: "a", Register: "hr:0"},
				{Name: "b", Register: "hr:1", Type: "uint32"},
				{Name: "d", Register: "hr:13"},
			},
			want: []string{"holding 1 0+14: a b c d"},
		},
		{
			name: "gap beyond maxGap splits",
			conn: `{"host":"h","maxGap":4}`,
			dps:  []dp{{Name: "a", Register: "hr:0"}, {Name: "b", Register: "hr:6"}, {Name: "c", Register: "hr:11"}},
			want: []string{"holding 1 0+1: a", "holding 1 6+6: b c"},
		},
		{
			name: "maxGap 0 merges only adjacent and overlapping",
			conn: `{"host":"h","maxGap":0}`,
			dps:  []dp{{Name: "a", Register: "hr:0", Type: "uint32"}, {Name: "b", Register: "hr:1"}, {Name: "c", Register: "hr:2"}, {Name: "d", Register: "hr:4"}},
			want: []string{"holding 1 0+3: a b c", "holding 1 4+1: d"},
		},
		{
			name: "maxCount splits",
			conn: `{"host":"h","maxCount":4,"maxGap":100}`,
			dps: []dp{
				{Name: "a", Register: "hr:0"}, {Name: "b", Register: "hr:2", Type: "uint32"},
				{Name: "c", Register: "hr:3"}, {Name: "d", Register: "hr:4", Type: "float64"},
			},
			want: []string{"holding 1 0+4: a b c", "holding 1 4+4: d"},
		},
		{
			name: "areas and units kept apart",
			conn: `{"host":"h","unitId":5}`,
			dps: []dp{
				{Name: "h1", Register: "hr:0"}, {Name: "i1", Register: "ir:1"}, {Name: "c1", Register: "coil:2"},
				{Name: "d1", Register: "di:3"}, {Name: "h2", Register: "hr:1@7"}, {Name: "h3", Register: "hr:2@5"},
			},
			want: []string{"coil 5 2+1: c1", "discrete 5 3+1: d1", "input 5 1+1: i1", "holding 5 0+3: h1 h3", "holding 7 1+1: h2"},
		},
		{
			name: "bits use maxBitCount",
			conn: `{"host":"h","maxGap":2000,"maxBitCount":1000}`,
			dps:  []dp{{Name: "a", Register: "coil:0"}, {Name: "b", Register: "coil:999"}, {Name: "c", Register: "coil:1000"}, {Name: "d", Register: "coil:1999"}},
			want: []string{"coil 1 0+1000: a b", "coil 1 1000+1000: c d"},
		},
		{
			name: "top of the address space",
			conn: `{"host":"h"}`,
			dps:  []dp{{Name: "a", Register: "hr:65532", Type: "uint64"}},
			want: []string{"holding 1 65532+4: a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewAdapter(adapters.Endpoint{Name: "e", Connection: json.RawMessage(tt.conn), DataPoints: tt.dps}, adapters.Env{})
			if err != nil {
				t.Fatal(err)
			}
			d := a.Diagnostics().(Diagnostics)
			var got []string
			for _, b := range d.Blocks {
				s := fmt.Sprintf("%s %d %d+%d:", b.Area, b.Unit, b.Start, b.Count)
				for _, n := range b.DataPoints {
					s += " " + n
				}
				got = append(got, s)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("blocks\n got %q\nwant %q", got, tt.want)
			}
			if d.RequestsPerPoll != len(tt.want) {
				t.Fatalf("RequestsPerPoll = %d, want %d", d.RequestsPerPoll, len(tt.want))
			}
		})
	}
}
