package rollout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEveryEventReasonIsDocumented parses the Event* constants of this package (and the
// autoscaler's and the controller's few) and checks that docs/events.md lists each.
func TestEveryEventReasonIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "events.md"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "next.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	reasons := []string{"ScaledUp", "ScaledDown", "NameConflict"}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Event") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
					v, _ := strconv.Unquote(lit.Value)
					reasons = append(reasons, v)
				}
			}
		}
	}
	if len(reasons) < 10 {
		t.Fatalf("found only %v in next.go", reasons)
	}
	for _, r := range reasons {
		if !strings.Contains(string(doc), "| `"+r+"` |") {
			t.Errorf("docs/events.md has no row for the event reason %s", r)
		}
	}
}
