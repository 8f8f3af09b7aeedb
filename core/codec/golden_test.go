package codec

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// goldenPayloads lists testdata/golden payloads written by other
// implementations (testdata/gen): name → path.
func goldenPayloads(t testing.TB) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, ".expected.json") {
			continue
		}
		out[filepath.Base(p)] = p
	}
	if len(out) < 40 {
		t.Fatalf("found %d golden payloads; run testdata/gen", len(out))
	}
	return out
}

// layersFromName reads the layers a golden file name promises, e.g.
// "py_batch50_kc.msgpack.zlib".
func layersFromName(t *testing.T, name string) Layers {
	t.Helper()
	parts := strings.Split(name, ".")
	var l Layers
	switch parts[1] {
	case "json":
		l.Encoding = EncodingJSON
	case "msgpack":
		l.Encoding = EncodingMsgpack
	default:
		t.Fatalf("%s: unknown encoding %q", name, parts[1])
	}
	if len(parts) > 2 {
		l.Deflate = Deflate(parts[2])
	}
	if strings.HasSuffix(parts[0], "_kc") {
		l.Compacted, l.DictVersion = true, 1
	}
	return l
}

func canonicalFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(b, Limits{})
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	j, err := d.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestGolden(t *testing.T) {
	for name, path := range goldenPayloads(t) {
		t.Run(name, func(t *testing.T) {
			payload, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			subject := strings.TrimSuffix(strings.Split(name, ".")[0], "_kc")
			want := canonicalFile(t, filepath.Join("testdata", "golden", subject+".expected.json"))

			d, err := Decode(payload, Limits{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if wantL := layersFromName(t, name); d.Layers != wantL {
				t.Errorf("layers = %+v, want %+v", d.Layers, wantL)
			}
			got, err := d.JSON()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("canonical JSON differs\n got: %.600s\nwant: %.600s", got, want)
			}
			// And encoding/json agrees the two are the same document.
			var a, b any
			if err := json.Unmarshal(got, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &b); err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(a, b) {
				t.Error("encoding/json sees different documents")
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestGoldenBatchAcrossImplementations checks that Python and Node describe
// the same batch, so the two sets of goldens test one thing two ways.
func TestGoldenBatchAcrossImplementations(t *testing.T) {
	py := canonicalFile(t, filepath.Join("testdata", "golden", "py_batch50.expected.json"))
	node := canonicalFile(t, filepath.Join("testdata", "golden", "node_batch50.expected.json"))
	if !bytes.Equal(py, node) {
		t.Fatal("py_batch50 and node_batch50 differ")
	}
}

// TestDictionaryFile keeps the three copies of the dictionary in step and
// enforces append-only: testdata/dictionary.json is what other
// implementations (and the generators) read, docs/codec.md is what people
// read, dictNames is what the code uses. A reordering or rename fails here.
func TestDictionaryFile(t *testing.T) {
	var f struct {
		Versions map[string]int `json:"versions"`
		Names    []string       `json:"names"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", "dictionary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Names) != len(dictNames) {
		t.Fatalf("dictionary.json has %d names, dictNames %d", len(f.Names), len(dictNames))
	}
	for i, n := range f.Names {
		if dictNames[i] != n {
			t.Errorf("index %d: dictionary.json %q, dictNames %q", i, n, dictNames[i])
		}
	}
	if len(f.Versions) != len(dictVersionLen)-1 {
		t.Errorf("dictionary.json has %d versions, dictVersionLen %d", len(f.Versions), len(dictVersionLen)-1)
	}
	for v, n := range f.Versions {
		i, _ := strconv.Atoi(v)
		if i < 1 || i >= len(dictVersionLen) || dictVersionLen[i] != n {
			t.Errorf("version %s: dictionary.json covers %d names", v, n)
		}
	}
	for v := 2; v < len(dictVersionLen); v++ {
		if dictVersionLen[v] < dictVersionLen[v-1] {
			t.Errorf("version %d covers fewer names than version %d", v, v-1)
		}
	}

	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "codec.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| (\\d+) \\| `([^`]+)` \\|").FindAllStringSubmatch(string(doc), -1)
	if len(rows) != len(dictNames) {
		t.Fatalf("docs/codec.md lists %d dictionary rows, want %d", len(rows), len(dictNames))
	}
	for i, r := range rows {
		if r[1] != strconv.Itoa(i) || r[2] != dictNames[i] {
			t.Errorf("docs/codec.md row %d: %s %s, want %d %s", i, r[1], r[2], i, dictNames[i])
		}
	}
}
