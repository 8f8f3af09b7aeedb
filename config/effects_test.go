package config

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// effectsFile maps every key to the tests that change it and see what it
// does: "<key> <package dir> <TestName>", one per line.
const effectsFile = "testdata/effects.txt"

type effect struct {
	line      int
	key       string
	dir, test string
}

func readEffects(t *testing.T) []effect {
	t.Helper()
	f, err := os.Open(effectsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []effect
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			t.Errorf("%s:%d: want <key> <package dir> <TestName>, got %q", effectsFile, n, line)
			continue
		}
		out = append(out, effect{line: n, key: fields[0], dir: fields[1], test: fields[2]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// testSources returns the source of every Test function in the _test.go
// files of dir (relative to the module root), whatever their build tags.
func testSources(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", filepath.FromSlash(dir), "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") {
				out[fd.Name.Name] = string(src[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset])
			}
		}
	}
	return out
}

// fieldPaths maps each key to its Go field path in Sections
// ("api.dedup_ttl" to "API.DedupTTL").
func fieldPaths() map[string]string {
	out := map[string]string{}
	var walk func(t reflect.Type, key, path string)
	walk = func(t reflect.Type, key, path string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("mapstructure")
			if tag == "" {
				continue
			}
			k, p := tag, f.Name
			if key != "" {
				k, p = key+"."+tag, path+"."+f.Name
			}
			if _, isKey := KeyByName(k); !isKey && f.Type.Kind() == reflect.Struct {
				walk(f.Type, k, p)
				continue
			}
			out[k] = p
		}
	}
	walk(reflect.TypeOf(Sections{}), "", "")
	return out
}

// mentions matches what a test that changes k has to name: one of its
// variables, its key, its field with the struct it is in (API.DedupTTL),
// or its field being set (DedupTTL: in a composite literal, .DedupTTL =
// or .DedupTTL, in an assignment).
func mentions(k Key, path string) *regexp.Regexp {
	var alts []string
	for _, env := range append([]string{k.Env}, k.Aliases...) {
		alts = append(alts, `\b`+env+`\b`)
	}
	alts = append(alts, regexp.QuoteMeta(k.Name)+`\b`)
	parts := strings.Split(path, ".")
	field := parts[len(parts)-1]
	alts = append(alts, `\b`+regexp.QuoteMeta(strings.Join(parts[len(parts)-2:], "."))+`\b`, `\b`+field+`:`, `\.`+field+`\s*(=[^=]|,)`)
	return regexp.MustCompile(strings.Join(alts, "|"))
}

// TestEverySettingHasAnEffectTest keeps docs/configuration.md honest: each
// key names, in testdata/effects.txt, a test that sets it to a value other
// than its default and observes what changes. The test must exist and must
// name the setting, a cheap guard against an entry pointing at an
// unrelated test. A setting nothing can be shown to use is removed (see
// Retired), not listed.
func TestEverySettingHasAnEffectTest(t *testing.T) {
	effects := readEffects(t)
	paths := fieldPaths()
	byKey := map[string][]effect{}
	for _, e := range effects {
		if _, ok := KeyByName(e.key); !ok {
			t.Errorf("%s:%d: %s is not a key", effectsFile, e.line, e.key)
			continue
		}
		byKey[e.key] = append(byKey[e.key], e)
	}
	for _, k := range Keys {
		if len(byKey[k.Name]) == 0 {
			t.Errorf("%s (%s) has no test in %s", k.Name, k.Env, effectsFile)
		}
		if paths[k.Name] == "" {
			t.Errorf("%s has no field in Sections", k.Name)
		}
	}
	sources := map[string]map[string]string{}
	for _, e := range effects {
		k, ok := KeyByName(e.key)
		if !ok {
			continue
		}
		if sources[e.dir] == nil {
			sources[e.dir] = testSources(t, e.dir)
		}
		src, ok := sources[e.dir][e.test]
		if !ok {
			t.Errorf("%s:%d: %s: no func %s in %s/*_test.go", effectsFile, e.line, e.key, e.test, e.dir)
			continue
		}
		if !mentions(k, paths[k.Name]).MatchString(src) {
			t.Errorf("%s:%d: %s in %s names neither %s, its key nor its field %s", effectsFile, e.line, e.test, e.dir, k.Env, paths[k.Name])
		}
	}
}
