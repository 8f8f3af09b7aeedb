package cmd

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// fuzzTarget is one Fuzz function: the package directory relative to the
// repository root (slash-separated) and the function's name.
type fuzzTarget struct{ dir, name string }

func (f fuzzTarget) String() string { return f.name + " in ./" + f.dir }

// TestMakeFuzzListsEveryFuzzTarget keeps `make fuzz` complete: every
// `func FuzzXxx(f *testing.F)` of the repository's test files must have its
// line in the Makefile's fuzz target, and every line there must name a
// fuzz function that exists. A fuzz test missing from the list still runs
// its seed corpus under go test, but never explores, which is easy not to
// notice.
func TestMakeFuzzListsEveryFuzzTarget(t *testing.T) {
	inSource := sourceFuzzTargets(t, "..")
	inMake := makeFuzzTargets(t, filepath.Join("..", "Makefile"))
	if len(inSource) < 30 {
		t.Fatalf("found only %d fuzz functions; is the walk still at the repository root?", len(inSource))
	}
	for _, f := range inSource {
		if !slices.Contains(inMake, f) {
			t.Errorf("%s is not in the Makefile's fuzz target; add:\n\t$(GO) test -run='^$$' -fuzz='^%s$$' -fuzztime=$(FUZZEXECS) ./%s",
				f, f.name, f.dir)
		}
	}
	for _, f := range inMake {
		if !slices.Contains(inSource, f) {
			t.Errorf("the Makefile's fuzz target runs %s, which no test file declares", f)
		}
	}
}

// sourceFuzzTargets lists the fuzz functions of every *_test.go file under
// root, as go test finds them: top-level functions named Fuzz (followed by
// nothing or a non-lowercase letter) whose one parameter is *testing.F.
func sourceFuzzTargets(t *testing.T, root string) []fuzzTarget {
	t.Helper()
	var out []fuzzTarget
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// The go tool ignores these directories too.
			if n := d.Name(); path != root && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if ok && fn.Recv == nil && isFuzzName(fn.Name.Name) && takesTestingF(f, fn) {
				out = append(out, fuzzTarget{dir: filepath.ToSlash(rel), name: fn.Name.Name})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// isFuzzName is go test's rule for the name of a test function of the
// prefix Fuzz.
func isFuzzName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Fuzz")
	if !ok {
		return false
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return rest == "" || !unicode.IsLower(r)
}

// takesTestingF reports whether fn's only parameter is *testing.F, under
// whatever name file imports "testing".
func takesTestingF(file *ast.File, fn *ast.FuncDecl) bool {
	params := fn.Type.Params.List
	if len(params) != 1 || len(params[0].Names) > 1 {
		return false
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "F" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	for _, imp := range file.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path != "testing" {
			continue
		}
		name := "testing"
		if imp.Name != nil {
			name = imp.Name.Name
		}
		return pkg.Name == name
	}
	return false
}

// makeFuzzLine is one line of the Makefile's fuzz recipe.
var makeFuzzLine = regexp.MustCompile(`^\t\$\(GO\) test -run='\^\$\$' -fuzz='\^(Fuzz\w*)\$\$' -fuzztime=\S+ \./(\S+)$`)

// makeFuzzTargets lists the fuzz runs of the Makefile's fuzz target. A
// recipe line of another form fails the test rather than being skipped,
// so that the list cannot drift out of this test's sight.
func makeFuzzTargets(t *testing.T, path string) []fuzzTarget {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fuzzTarget
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "fuzz:":
			in = true
		case !in:
		case !strings.HasPrefix(line, "\t"):
			in = false
		default:
			m := makeFuzzLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("Makefile fuzz recipe line %q is not one fuzz run of the form this test reads", line)
			}
			ft := fuzzTarget{dir: m[2], name: m[1]}
			if slices.Contains(out, ft) {
				t.Errorf("the Makefile's fuzz target runs %s twice", ft)
			}
			out = append(out, ft)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no fuzz runs found under the Makefile's fuzz: target")
	}
	return out
}
