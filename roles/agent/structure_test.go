package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// maxMethods bounds the methods of one type in the agent's tree: a type
// with more does several things, each of which wants its own type.
const maxMethods = 25

// TestNoTypeDoesEverything counts the methods of every type of the
// roles/agent tree, test files excluded, and fails on any type with more
// than maxMethods.
func TestNoTypeDoesEverything(t *testing.T) {
	counts := map[string]int{} // "dir.Type" -> methods
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			dir := filepath.ToSlash(filepath.Dir(path))
			if dir == "." {
				dir = "agent"
			}
			counts[dir+"."+receiverName(fn.Recv.List[0].Type)]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) < 20 {
		t.Fatalf("found methods of %d types only; is the walk broken?", len(counts))
	}
	types := make([]string, 0, len(counts))
	for ty := range counts {
		types = append(types, ty)
	}
	sort.Slice(types, func(i, j int) bool { return counts[types[i]] > counts[types[j]] })
	var top []string
	for _, ty := range types[:min(8, len(types))] {
		top = append(top, ty+"="+strconv.Itoa(counts[ty]))
	}
	t.Logf("most methods: %s", strings.Join(top, ", "))
	for _, ty := range types {
		if counts[ty] > maxMethods {
			t.Errorf("%s has %d methods, more than %d", ty, counts[ty], maxMethods)
		}
	}
}

func receiverName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverName(x.X)
	case *ast.IndexExpr:
		return receiverName(x.X)
	case *ast.IndexListExpr:
		return receiverName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

// TestHTTPAPIImportsNoAgentPackage: the HTTP API declares the interfaces
// it needs; it imports none of the agent's packages.
func TestHTTPAPIImportsNoAgentPackage(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("httpapi/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no httpapi sources: %v", err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/edgeplat/edgeplat/roles/") {
				t.Errorf("%s imports %s", path, p)
			}
		}
	}
}
