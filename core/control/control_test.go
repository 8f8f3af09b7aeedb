package control

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/codec"
)

func TestTopics(t *testing.T) {
	tenant, agent := codec.NewUUID(), codec.NewUUID()
	p := Prefix(tenant, agent)
	if want := "i/" + codec.EncodeID(tenant) + "/a/" + codec.EncodeID(agent); p != want {
		t.Fatalf("Prefix = %q, want %q", p, want)
	}
	if got := CommandTopic(p+"/", CmdTargetState); got != p+"/cmd/target-state" {
		t.Fatalf("CommandTopic = %q", got)
	}
	if got := CommandFilter(p); got != p+"/cmd/#" {
		t.Fatalf("CommandFilter = %q", got)
	}
	if got := ReportTopic(p, ReportState); got != p+"/state" {
		t.Fatalf("ReportTopic = %q", got)
	}
	gotP, name, err := ParseCommandTopic(p + "/cmd/jobs/42")
	if err != nil || gotP != p || name != "jobs/42" {
		t.Fatalf("ParseCommandTopic = %q, %q, %v", gotP, name, err)
	}
	for _, bad := range []string{"", "i/x/a/y/cmd/z", p + "/cmd", p + "/cmd/", p + "/cmd//x", p + "/state", "j" + p[1:] + "/cmd/x"} {
		if _, _, err := ParseCommandTopic(bad); err == nil {
			t.Errorf("ParseCommandTopic(%q) accepted", bad)
		}
	}
}

func TestAddSeq(t *testing.T) {
	tests := []struct {
		name string
		in   []uint64
		want string
	}{
		{"empty", nil, "[]"},
		{"one", []uint64{5}, "[[5,5]]"},
		{"contiguous", []uint64{1, 2, 3}, "[[1,3]]"},
		{"out of order", []uint64{3, 1, 2}, "[[1,3]]"},
		{"gap", []uint64{1, 2, 5, 6}, "[[1,2],[5,6]]"},
		{"fills a gap", []uint64{1, 3, 2}, "[[1,3]]"},
		{"duplicate", []uint64{4, 4, 4}, "[[4,4]]"},
		{"before all", []uint64{10, 11, 1}, "[[1,1],[10,11]]"},
		{"joins right", []uint64{10, 9}, "[[9,10]]"},
		{"zero", []uint64{0, 1}, "[[0,1]]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := []Range{}
			for _, s := range tt.in {
				rs = AddSeq(rs, s)
			}
			b, _ := json.Marshal(rs)
			if string(b) != tt.want {
				t.Fatalf("got %s, want %s", b, tt.want)
			}
			k := KeyReceipt{KID: "k", Ranges: rs}
			for _, s := range tt.in {
				if !k.Contains(s) {
					t.Fatalf("receipt %s does not contain %d", b, s)
				}
			}
		})
	}
}

func TestDecodeReceipts(t *testing.T) {
	good := `{"at":1764400000000,"keys":[{"kid":"Ab12Cd34","ranges":[[1,1042],[1050,1060]]}],"future":1}`
	r, err := DecodeReceipts([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if k := r.Keys[0]; !k.Contains(1) || !k.Contains(1042) || k.Contains(1043) || !k.Contains(1055) || k.Contains(1061) {
		t.Fatalf("Contains wrong for %+v", k)
	}
	bad := map[string]string{
		"not json":        `{`,
		"trailing":        `{"at":1,"keys":[]} {}`,
		"reversed range":  `{"at":1,"keys":[{"kid":"k","ranges":[[5,1]]}]}`,
		"overlap":         `{"at":1,"keys":[{"kid":"k","ranges":[[1,5],[5,6]]}]}`,
		"unsorted":        `{"at":1,"keys":[{"kid":"k","ranges":[[7,8],[1,2]]}]}`,
		"triple":          `{"at":1,"keys":[{"kid":"k","ranges":[[1,2,3]]}]}`,
		"negative":        `{"at":1,"keys":[{"kid":"k","ranges":[[-1,2]]}]}`,
		"no kid":          `{"at":1,"keys":[{"ranges":[[1,2]]}]}`,
		"too many keys":   `{"at":1,"keys":[` + strings.Repeat(`{"kid":"k","ranges":[]},`, maxReceiptKeys) + `{"kid":"k","ranges":[]}]}`,
		"over byte limit": `{"at":1,"keys":[],"pad":"` + strings.Repeat("x", MaxCommandBytes) + `"}`,
	}
	for name, in := range bad {
		if _, err := DecodeReceipts([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestDecodeTargetStateNotice(t *testing.T) {
	n, err := DecodeTargetStateNotice([]byte(`{"version":7,"updatedAt":"2026-11-29T10:00:00Z","extra":true}`))
	if err != nil || n.Version != 7 || n.Cleared {
		t.Fatalf("got %+v, %v", n, err)
	}
	for _, in := range []string{`{"version":-1}`, `[]`, `{"version":"7"}`, ``} {
		if _, err := DecodeTargetStateNotice([]byte(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzDecodeReceipts(f *testing.F) {
	f.Add([]byte(`{"at":1,"keys":[{"kid":"Ab12Cd34","ranges":[[1,1042],[1050,1060]]}]}`))
	f.Add([]byte(`{"at":1,"keys":[{"kid":"k","ranges":[[18446744073709551615,18446744073709551615]]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReceipts(b)
		if err != nil {
			return
		}
		for _, k := range r.Keys {
			// Re-adding every bound must change nothing: the ranges are
			// already sorted, disjoint and merged where they touch.
			rs := slices.Clone(k.Ranges)
			for _, x := range k.Ranges {
				rs = AddSeq(rs, x.First)
				rs = AddSeq(rs, x.Last)
				if !k.Contains(x.First) || !k.Contains(x.Last) {
					t.Fatalf("receipt %+v does not contain its own bound", k)
				}
			}
			if len(rs) > len(k.Ranges) {
				t.Fatalf("AddSeq grew accepted ranges %v to %v", k.Ranges, rs)
			}
		}
	})
}

func FuzzParseCommandTopic(f *testing.F) {
	p := Prefix(codec.NewUUID(), codec.NewUUID())
	f.Add(p + "/cmd/target-state")
	f.Add(p + "/cmd/jobs/1")
	f.Add("i/+/a/#/cmd/x")
	f.Fuzz(func(t *testing.T, topic string) {
		prefix, name, err := ParseCommandTopic(topic)
		if err != nil {
			return
		}
		if CommandTopic(prefix, name) != topic {
			t.Fatalf("round trip of %q gave %q", topic, CommandTopic(prefix, name))
		}
	})
}
