package drift

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// render is a golden file's text: "path type" per field, or "error: ...".
func render(fields []Field, err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, f := range fields {
		b.WriteString(f.Path + " " + string(f.Type) + "\n")
	}
	return b.String()
}

// TestFlattenGolden flattens each testdata/flatten/*.json frame and
// compares with its .golden file.
func TestFlattenGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/flatten/*.json")
	if err != nil || len(inputs) < 8 {
		t.Fatalf("golden inputs %v, %v", inputs, err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			frame, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := render(Flatten(frame))
			golden := strings.TrimSuffix(in, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestFlattenLimits(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := Flatten([]byte(deep)); err != nil {
		t.Errorf("%d levels: %v", MaxDepth, err)
	}
	if _, err := Flatten([]byte("[" + deep + "]")); !errors.Is(err, ErrTooDeep) {
		t.Errorf("%d levels: err %v, want ErrTooDeep", MaxDepth+1, err)
	}
	var b strings.Builder
	b.WriteString("{")
	for i := range MaxFieldsPerItem + 1 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString("}")
	if _, err := Flatten([]byte(b.String())); !errors.Is(err, ErrTooManyFields) {
		t.Errorf("%d fields: err %v, want ErrTooManyFields", MaxFieldsPerItem+1, err)
	}
}

// FuzzFlatten: for any bytes, Flatten either rejects them or returns
// sorted, distinct paths of known types, and accepts no invalid JSON;
// valid JSON is refused only for a documented reason, and gives what the
// reference flattener gives.
func FuzzFlatten(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/flatten/*.json")
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		fields, err := Flatten(frame)
		valid := json.Valid(frame)
		if err != nil {
			if valid && !errors.Is(err, ErrNotContainer) && !errors.Is(err, ErrTooDeep) && !errors.Is(err, ErrTooManyFields) {
				t.Fatalf("valid JSON refused: %v", err)
			}
			checkReference(t, frame)
			return
		}
		if !valid {
			t.Fatalf("invalid JSON accepted: %v", fields)
		}
		checkReference(t, frame)
		if !sort.SliceIsSorted(fields, func(i, j int) bool { return fields[i].Path < fields[j].Path }) {
			t.Fatalf("not sorted: %v", fields)
		}
		for i, fl := range fields {
			if !fl.Type.valid() || (i > 0 && fields[i-1].Path == fl.Path) {
				t.Fatalf("field %d %+v: bad type or repeated path", i, fl)
			}
		}
		again, _ := Flatten(frame)
		if render(again, nil) != render(fields, nil) {
			t.Fatal("not deterministic")
		}
	})
}

// FuzzFlatten's other half: on valid JSON the scanner gives what the
// token-based flattenRef gives, fields or error.
func TestFlattenMatchesReference(t *testing.T) {
	inputs, _ := filepath.Glob("testdata/flatten/*.json")
	frames := []string{`{"a\u002eb":{"c":[{"d":null},{"d":"x"}]}}`, "[[],[1],{}]", `{"\ud800":1,"k\"q":[true,false,null]}`,
		` { "a" : [ 1 , { "b" : -1.5e3 } ] } `, "{\"\xff\":1}", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)}
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, string(b))
	}
	for _, frame := range frames {
		checkReference(t, []byte(frame))
	}
}

func checkReference(t *testing.T, frame []byte) {
	t.Helper()
	if !json.Valid(frame) {
		return
	}
	got, want := render(Flatten(frame)), render(flattenRef(frame))
	if got != want {
		t.Fatalf("frame %q:\n got %s\nwant %s", frame, got, want)
	}
}
