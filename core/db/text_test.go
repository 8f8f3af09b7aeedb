package db

import "testing"

func TestStorableText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"plain text", "plain text"},
		{"a\x00b", "a\uFFFDb"},
		{"\x00\x00", "\uFFFD\uFFFD"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"ünïcödé", "ünïcödé"},
	} {
		if got := StorableText(tt.in); got != tt.want {
			t.Errorf("StorableText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestStorableJSON(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{`{"a":"x\\u0000"}`, `{"a":"x\\u0000"}`}, // an escaped backslash, then text: left alone
		{`{"a":"x\u0000y"}`, `{"a":"x�y"}`},
		{`{"k\u0000":["\u0000",{"n":"\u0000"}],"m":2}`, `{"k�":["�",{"n":"�"}],"m":2}`},
	} {
		got, err := StorableJSON([]byte(tt.in))
		if err != nil {
			t.Fatalf("StorableJSON(%s): %v", tt.in, err)
		}
		if string(got) != tt.want {
			t.Errorf("StorableJSON(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if _, err := StorableJSON([]byte(`{"a":"\u0000"`)); err == nil {
		t.Error("StorableJSON of a broken document with a NUL escape: no error")
	}
}
