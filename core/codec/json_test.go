package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// stdJSON writes v with encoding/json as AppendJSON promises to.
func stdJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// checkJSONDifferential holds the JSON decoder to encoding/json: the same
// inputs are valid, and they decode to the same value, except where this
// package is stricter on purpose (duplicate keys, limits).
func checkJSONDifferential(t testing.TB, in []byte) {
	d := getDecoder(Limits{MaxInputSize: math.MaxInt, MaxDecodedSize: math.MaxInt, MaxDepth: 9000, MaxContainerLen: math.MaxInt, MaxValues: math.MaxInt})
	defer putDecoder(d)
	jd := jsonDecoder{valueDecoder: d, b: in}
	jd.ws()
	got, err := jd.value(false)
	if err == nil {
		jd.ws()
		if jd.p != len(in) {
			err = jd.syntax("after top-level value")
		}
	}

	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var want any
	stdErr := dec.Decode(&want)
	if stdErr == nil && dec.InputOffset() != int64(len(in)) {
		// encoding/json's Decoder stops after one value; Unmarshal would
		// reject trailing bytes other than whitespace.
		if rest := bytes.TrimLeft(in[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
			stdErr = errors.New("trailing data")
		}
	}
	if stdErr == nil {
		stdErr = func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = errors.New("number out of range")
				}
			}()
			want = fromStdChecked(want)
			return nil
		}()
	}

	switch {
	case err == nil && stdErr != nil:
		t.Fatalf("accepted %q, encoding/json: %v", in, stdErr)
	case err != nil && stdErr == nil:
		if strings.Contains(err.Error(), "duplicate key") || errors.Is(err, ErrTooDeep) {
			return
		}
		t.Fatalf("rejected %q (%v), encoding/json accepts it", in, err)
	case err == nil:
		a, err1 := AppendJSON(nil, got)
		b, err2 := AppendJSON(nil, want)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Fatalf("%q: got %s, encoding/json %s", in, a, b)
		}
	}
}

// fromStdChecked converts encoding/json's UseNumber output to this
// package's number types with strconv, independently of the decoder under
// test. It panics (recovered above) on a number encoding/json accepts
// syntactically but that has no float64 value.
func fromStdChecked(v any) any {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if s == "-0" {
			return math.Copysign(0, -1)
		}
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i
			}
			if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				return u
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			panic(err)
		}
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = fromStdChecked(e)
		}
	case []any:
		for i, e := range x {
			x[i] = fromStdChecked(e)
		}
	}
	return v
}

func TestJSONDifferential(t *testing.T) {
	inputs := []string{
		`{}`, `[]`, `[1,-1,0,-0,0.5,-0.0,1e5,1E+5,1e-5,1.5e300,123456789012345678901234567890]`,
		`[9223372036854775807,9223372036854775808,-9223372036854775808,-9223372036854775809,18446744073709551615,18446744073709551616]`,
		`["\u0000\u001f\"\\\/\b\f\n\r\t\u00e9\uD83C\uDF21\uD800\uDC00\uDBFF\uDFFF"]`,
		`["\ud800","\udc00","\ud800\u0041","\ud800\\","\uDFFF\uD800"]`,
		"[\"\xff\xfe\xc3\x28\xe2\x82\"]", "[\"\xed\xa0\x80\"]", "[\"\xf4\x90\x80\x80\"]",
		` { "a" : [ true , false , null ] , "b" : { } } `, `[1e400]`, `[1e-400]`, `[-1e400]`,
		`{"a":1,"a":2}`, `[01]`, `[1.]`, `[.1]`, `["a\u"]`, `[tRue]`, "[1]\x00", `"top"`, `1`, `-`, ``,
	}
	for _, s := range inputs {
		checkJSONDifferential(t, []byte(s))
	}
	// Random JSON-ish inputs.
	r := rand.New(rand.NewPCG(3, 4))
	atoms := []string{"{", "}", "[", "]", ",", ":", `"a"`, `"b"`, `"\u00e9"`, `"\ud800"`, "1", "-0", "1.5e3", "true", "null", " ", "\"\xff\"", "0", "e", "."}
	for range 20000 {
		var sb strings.Builder
		for range r.IntN(12) {
			sb.WriteString(atoms[r.IntN(len(atoms))])
		}
		checkJSONDifferential(t, []byte(sb.String()))
	}
}

// TestAppendJSONMatchesEncodingJSON holds the canonical writer to
// encoding/json's bytes on random trees.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var gen func(depth int) any
	gen = func(depth int) any {
		switch k := r.IntN(10); {
		case k == 0 && depth < 5:
			m := map[string]any{}
			for range r.IntN(6) {
				m[randString(r)] = gen(depth + 1)
			}
			return m
		case k == 1 && depth < 5:
			a := make([]any, r.IntN(6))
			for i := range a {
				a[i] = gen(depth + 1)
			}
			return a
		case k == 2:
			return randString(r)
		case k == 3:
			return int64(r.Uint64())
		case k == 4:
			return r.Uint64()
		case k == 5:
			return math.Float64frombits(r.Uint64())
		case k == 6:
			return float64(r.IntN(2000)-1000) * math.Pow(10, float64(r.IntN(60)-30))
		case k == 7:
			return []byte(randString(r))
		case k == 8:
			return r.IntN(2) == 0
		}
		return nil
	}
	for range 5000 {
		v := gen(0)
		want, err := stdJSON(v)
		got, err2 := AppendJSON(nil, v)
		if err != nil {
			// NaN/Inf: encoding/json refuses, AppendJSON writes null.
			if err2 != nil || !bytes.Contains(got, []byte("null")) {
				t.Fatalf("%#v: encoding/json %v, AppendJSON %s %v", v, err, got, err2)
			}
			continue
		}
		if err2 != nil || !bytes.Equal(got, want) {
			t.Fatalf("%#v:\n got %s\nwant %s", v, got, want)
		}
	}
	// float32 follows encoding/json's 32-bit formatting.
	for _, f := range []float32{0.1, 1e-7, 1e21, 3.4e38, -0.5} {
		want, _ := stdJSON(f)
		if got, _ := AppendJSON(nil, f); !bytes.Equal(got, want) {
			t.Errorf("float32 %v: %s, want %s", f, got, want)
		}
	}
}

func randString(r *rand.Rand) string {
	runes := []rune{'a', 'Z', '0', '~', '"', '\\', '\n', '\x00', '\x1f', '<', '&', 'é', '\u2028', '\u2029', '🌡', utf8.RuneError}
	var b []byte
	for range r.IntN(8) {
		if r.IntN(10) == 0 {
			b = append(b, 0xff) // invalid UTF-8
			continue
		}
		b = utf8.AppendRune(b, runes[r.IntN(len(runes))])
	}
	return string(b)
}
