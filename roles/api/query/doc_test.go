package query

import (
	"os"
	"strings"
	"testing"
)

// TestDocExamples parses every query in the Examples section of
// docs/query-language.md, so the reference cannot drift from the parser.
func TestDocExamples(t *testing.T) {
	b, err := os.ReadFile("../../../docs/query-language.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## Examples\n")
	if i < 0 {
		t.Fatal("no Examples section")
	}
	n := 0
	inBlock := false
	for _, line := range strings.Split(doc[i:], "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inBlock = !inBlock
		case inBlock && line != "" && !strings.HasPrefix(line, "#"):
			n++
			if _, err := Parse(line); err != nil {
				t.Errorf("example %q: %v", line, err)
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d examples found", n)
	}
}
