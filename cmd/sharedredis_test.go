package cmd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestsLeaveTheSharedRedisAlone: the machine's Redis is shared by every
// test run at once (several developers, CI). A test that picks a fixed
// logical database (DB 12, STREAMSTORE_DB=12) collides with another run of
// itself, and one that flushes a database wipes another run's streams. So a
// test flushes only a server it started (a file that flushes must start one
// with coretest.PrivateRedis; its helpers get the client passed in) and
// never selects a database by number.
func TestTestsLeaveTheSharedRedisAlone(t *testing.T) {
	var problems []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "build" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		problems = append(problems, sharedRedisProblems(t, path, nil)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// sharedRedisProblems lists the ways the test file at path (or src, when
// given) touches the shared Redis unsafely.
func sharedRedisProblems(t *testing.T, path string, src any) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var out []string
	report := func(n ast.Node, msg string) {
		out = append(out, fset.Position(n.Pos()).String()+": "+msg)
	}
	private := false
	var flushes []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "PrivateRedis":
					private = true
				case "FlushDB", "FlushAll", "FlushDBAsync", "FlushAllAsync":
					flushes = append(flushes, n)
				}
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING && (n.Value == `"STREAMSTORE_DB"` || strings.HasPrefix(n.Value, `"STREAMSTORE_DB=`)) {
				report(n, "sets STREAMSTORE_DB: use coretest.PrivateRedis instead of a fixed database")
			}
		case *ast.CompositeLit:
			if !isRedisOptions(n.Type) {
				return true
			}
			for _, el := range n.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "DB" {
					if lit, ok := kv.Value.(*ast.BasicLit); !ok || lit.Value != "0" {
						report(kv, "selects a fixed Redis database: use coretest.PrivateRedis")
					}
				}
			}
		}
		return true
	})
	if !private {
		for _, n := range flushes {
			report(n, "flushes a Redis database it did not start: use coretest.PrivateRedis")
		}
	}
	return out
}

// isRedisOptions matches go-redis's and the stream store's Options types.
func isRedisOptions(e ast.Expr) bool {
	if u, ok := e.(*ast.UnaryExpr); ok {
		e = u.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Options" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && strings.Contains(strings.ToLower(pkg.Name), "redis")
}

func TestSharedRedisProblems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want int
	}{
		{"fixed db and flush", `package x
func TestA(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: a, DB: 12})
	c.FlushDB(ctx)
}`, 2},
		{"constant db", `package x
const n = 9
func f() { _ = redisstore.Options{Addrs: []string{a}, DB: n} }`, 1},
		{"env db", `package x
func f(t *testing.T) { t.Setenv("STREAMSTORE_DB", "11") }`, 1},
		{"private server may be flushed", `package x
func TestB(t *testing.T) {
	addr := coretest.PrivateRedis(t).Addr()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	c.FlushDB(ctx)
}`, 0},
		{"db 0 and other Options", `package x
func f() { _ = redis.Options{DB: 0}; _ = mqtt.Options{DB: 3} }`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sharedRedisProblems(t, "x_test.go", tt.src); len(got) != tt.want {
				t.Fatalf("got %d problems %v, want %d", len(got), got, tt.want)
			}
		})
	}
}
