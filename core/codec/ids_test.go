package codec

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestMsgID(t *testing.T) {
	good := map[string]struct {
		kid string
		seq uint64
	}{
		"v2_Kx7Qm2Za_104729":               {"Kx7Qm2Za", 104729},
		"v2_00000000_0":                    {"00000000", 0},
		"v2_zzzzZZZZ_18446744073709551615": {"zzzzZZZZ", math.MaxUint64},
	}
	for s, w := range good {
		kid, seq, err := ParseMsgID(s)
		if err != nil || kid != w.kid || seq != w.seq {
			t.Errorf("ParseMsgID(%q) = %q, %d, %v", s, kid, seq, err)
		}
		if f, err := FormatMsgID(w.kid, w.seq); err != nil || f != s {
			t.Errorf("FormatMsgID(%q, %d) = %q, %v", w.kid, w.seq, f, err)
		}
	}
	bad := []string{
		"", "v2_", "v2_Kx7Qm2Za", "v2_Kx7Qm2Za_", "v2_Kx7Qm2Za_01", "v2_Kx7Qm2Za_-1", "v2_Kx7Qm2Za_+1",
		"v2_Kx7Qm2Za_18446744073709551616", "v2_Kx7Qm2Za_1 ", " v2_Kx7Qm2Za_1", "v1_Kx7Qm2Za_1", "V2_Kx7Qm2Za_1",
		"v2_Kx7Qm2Z_1", "v2_Kx7Qm2Zab_1", "v2_Kx7Qm2-a_1", "v2_Kx7Qm2_a_1", "v2_Kx7Qm2Za-1", "v2_Kx7Qm2Za_1_2",
		"v2_Kx7Qm2Za_1x", "v2_Kx7Qm2Za_１", "v2_Kx7Qm2Zé_1", "v2_Kx7Qm2Za_000000000000000000001",
	}
	for _, s := range bad {
		if _, _, err := ParseMsgID(s); !errors.Is(err, ErrInvalidMsgID) {
			t.Errorf("ParseMsgID(%q) err = %v", s, err)
		}
	}
	for _, kid := range []string{"", "short", "toolong12", "Kx7Qm2Z_", "Kx7Qm2Z-", "Kx7Qm2Zé"} {
		if _, err := FormatMsgID(kid, 1); !errors.Is(err, ErrInvalidMsgID) {
			t.Errorf("FormatMsgID(%q) err = %v", kid, err)
		}
	}
}

func TestIDs(t *testing.T) {
	const canon, short = "0f8fad5b-d9cb-469f-a165-70867728950e", "D4-tW9nLRp-hZXCGdyiVDg"
	u, err := ParseUUID(canon)
	if err != nil {
		t.Fatal(err)
	}
	if got := EncodeID(u); got != short {
		t.Errorf("EncodeID = %q, want %q", got, short)
	}
	if got, err := DecodeID(short); err != nil || got != u {
		t.Errorf("DecodeID = %v, %v", got, err)
	}
	if got := u.String(); got != canon {
		t.Errorf("String = %q", got)
	}
	if got, err := IDFromUUID("0F8FAD5B-D9CB-469F-A165-70867728950E"); err != nil || got != short {
		t.Errorf("IDFromUUID upper case = %q, %v", got, err)
	}
	if got, err := UUIDFromID(short); err != nil || got != canon {
		t.Errorf("UUIDFromID = %q, %v", got, err)
	}
	var raw [16]byte // a plain array converts implicitly
	if EncodeID(raw) != "AAAAAAAAAAAAAAAAAAAAAA" {
		t.Error("zero UUID")
	}
	for i := range raw {
		raw[i] = 0xff
	}
	if EncodeID(raw) != "_____________________w" {
		t.Errorf("all ones: %s", EncodeID(raw))
	}

	badIDs := []string{
		"", "D4-tW9nLRp-hZXCGdyiVD", "D4-tW9nLRp-hZXCGdyiVDgA", "D4-tW9nLRp-hZXCGdyiVDg==",
		"D4+tW9nLRp-hZXCGdyiVDg", "D4/tW9nLRp-hZXCGdyiVDg", "D4-tW9nLRp-hZXCGdyiVDh", // trailing bits
		"D4-tW9nLRp-hZXCGdyiV\nDg", "D4-tW9nLRp-hZXCGdyiVD\n", "D4-tW9nLRp-hZXCGdyiVD=", "D4-tW9nLRp-hZXCGdyiVDé",
		"D4-tW9nLRp-hZXCGdyiV g",
	}
	for _, s := range badIDs {
		if _, err := DecodeID(s); !errors.Is(err, ErrInvalidID) {
			t.Errorf("DecodeID(%q) err = %v", s, err)
		}
		if _, err := UUIDFromID(s); !errors.Is(err, ErrInvalidID) {
			t.Errorf("UUIDFromID(%q) err = %v", s, err)
		}
	}
	badUUIDs := []string{
		"", "0f8fad5bd9cb469fa16570867728950e", "{0f8fad5b-d9cb-469f-a165-70867728950e}",
		"urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950g",
		"0f8fad5b-d9cb-469fa-165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950", " 0f8fad5b-d9cb-469f-a165-70867728950e",
	}
	for _, s := range badUUIDs {
		if _, err := ParseUUID(s); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseUUID(%q) err = %v", s, err)
		}
		if _, err := IDFromUUID(s); !errors.Is(err, ErrInvalidID) {
			t.Errorf("IDFromUUID(%q) err = %v", s, err)
		}
	}
}

// Reference definitions, written independently as regular expressions, for
// the fuzz targets to compare against.
var (
	msgIDRef = regexp.MustCompile(`^v2_([A-Za-z0-9]{8})_(0|[1-9][0-9]*)$`)
	idRef    = regexp.MustCompile(`^[A-Za-z0-9_-]{21}[AQgw]$`)
)

func FuzzParseMsgID(f *testing.F) {
	for _, s := range []string{"v2_Kx7Qm2Za_104729", "v2_00000000_0", "v2_Kx7Qm2Za_01", "v2_Kx7Qm2Za_18446744073709551616", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kid, seq, err := ParseMsgID(s)
		m := msgIDRef.FindStringSubmatch(s)
		refOK := m != nil
		var refSeq uint64
		if refOK {
			var perr error
			refSeq, perr = strconv.ParseUint(m[2], 10, 64)
			refOK = perr == nil
		}
		if (err == nil) != refOK {
			t.Fatalf("ParseMsgID(%q) err = %v, reference ok = %v", s, err, refOK)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidMsgID) {
				t.Fatalf("error class: %v", err)
			}
			return
		}
		if kid != m[1] || seq != refSeq {
			t.Fatalf("ParseMsgID(%q) = %q, %d", s, kid, seq)
		}
		if back, err := FormatMsgID(kid, seq); err != nil || back != s {
			t.Fatalf("FormatMsgID round trip: %q, %v", back, err)
		}
	})
}

// FuzzTopicID fuzzes DecodeID; it is not named FuzzDecodeID so that
// -fuzz=FuzzDecode selects exactly one target.
func FuzzTopicID(f *testing.F) {
	for _, s := range []string{"D4-tW9nLRp-hZXCGdyiVDg", "AAAAAAAAAAAAAAAAAAAAAA", "D4-tW9nLRp-hZXCGdyiVDh", "D4+tW9nLRp-hZXCGdyiVDg==", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := DecodeID(s)
		if (err == nil) != idRef.MatchString(s) {
			t.Fatalf("DecodeID(%q) err = %v, reference match = %v", s, err, idRef.MatchString(s))
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidID) {
				t.Fatalf("error class: %v", err)
			}
			return
		}
		if EncodeID(u) != s {
			t.Fatalf("round trip %q → %q", s, EncodeID(u))
		}
		if back, err := ParseUUID(u.String()); err != nil || back != u {
			t.Fatalf("UUID round trip: %v", err)
		}
	})
}

func TestNewUUID(t *testing.T) {
	seen := map[UUID]bool{}
	for range 1000 {
		u := NewUUID()
		if seen[u] {
			t.Fatalf("NewUUID repeated %s", u)
		}
		seen[u] = true
		s := u.String()
		if s[14] != '4' || !strings.ContainsRune("89ab", rune(s[19])) {
			t.Fatalf("%s is not a version 4, RFC 9562 variant UUID", s)
		}
		if back, err := ParseUUID(s); err != nil || back != u {
			t.Fatalf("ParseUUID(%s) = %s, %v", s, back, err)
		}
	}
}

func TestParseIDOrUUID(t *testing.T) {
	const canon, short = "0f8fad5b-d9cb-469f-a165-70867728950e", "D4-tW9nLRp-hZXCGdyiVDg"
	want, err := ParseUUID(canon)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in      string
		wantErr bool
	}{
		{canon, false},
		{"0F8FAD5B-D9CB-469F-A165-70867728950E", false},
		{short, false},
		{"", true},
		{"D4-tW9nLRp-hZXCGdyiVD!", true}, // 22 characters, not Base64
		{"0f8fad5bd9cb469fa16570867728950e", true}, // no hyphens
		{"{0f8fad5b-d9cb-469f-a165-70867728950e}", true},
	}
	for _, tt := range tests {
		got, err := ParseIDOrUUID(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseIDOrUUID(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if err != nil && !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseIDOrUUID(%q) error = %v, want ErrInvalidID", tt.in, err)
		}
		if err == nil && got != want {
			t.Errorf("ParseIDOrUUID(%q) = %v, want %v", tt.in, got, want)
		}
	}
}
