package devenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// stage is the part of a kwok Stage the tests read.
type stage struct {
	Metadata struct{ Name string }
	Spec     struct {
		Selector struct {
			MatchExpressions []matchExpression `json:"matchExpressions"`
		}
		Next struct {
			StatusTemplate string `json:"statusTemplate"`
		}
	}
}

type matchExpression struct {
	Key, Operator string
	Values        []string
}

func readStage(t *testing.T, path string) stage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s stage
	if err := yaml.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// TestKwokStagesHonourReadinessGates: kwok's own pod-ready stage, which sets every readiness
// gate's condition True (and so would open the warm-up gate before any warm-up check), runs only
// for pods without gates; pods with gates get devenv's stages, where Ready follows the gates.
func TestKwokStagesHonourReadinessGates(t *testing.T) {
	assets := t.TempDir()
	if err := os.MkdirAll(filepath.Join(assets, "kwok-stages"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range KwokStages {
		body := "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: " + name + "\nspec:\n  selector:\n    matchExpressions:\n    - key: .status.phase\n      operator: In\n      values: [Pending]\n  next:\n    statusTemplate: |\n      phase: Running\n"
		if err := os.WriteFile(filepath.Join(assets, "kwok-stages", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "kwok-stages")
	paths, err := kwokStages(assets, dir)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]stage{}
	for _, p := range paths {
		s := readStage(t, p)
		byName[s.Metadata.Name] = s
	}
	for _, name := range []string{"pod-ready-gated", "pod-gates-true", "pod-gates-false"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("kwok runs without stage %s (stages: %v)", name, paths)
		}
	}
	ready := byName["pod-ready.yaml"]
	exprs := ready.Spec.Selector.MatchExpressions
	if len(exprs) != 2 || exprs[0].Key != ".status.phase" || exprs[1].Key != ".spec.readinessGates" || exprs[1].Operator != "DoesNotExist" {
		t.Errorf("kwok's pod-ready selector = %+v, want its own and no readiness gates", exprs)
	}
	if ready.Spec.Next.StatusTemplate != "phase: Running\n" {
		t.Errorf("kwok's pod-ready template changed: %q", ready.Spec.Next.StatusTemplate)
	}
	if p := paths[slices.IndexFunc(paths, func(p string) bool { return filepath.Base(p) == "pod-ready.yaml" })]; filepath.Dir(p) != dir {
		t.Errorf("pod-ready.yaml read from %s: the assets' copy is not limited to pods without gates", p)
	}
	for _, name := range []string{"pod-ready-gated", "pod-gates-true", "pod-gates-false"} {
		if !slices.ContainsFunc(byName[name].Spec.Selector.MatchExpressions, func(e matchExpression) bool {
			return e.Key == ".spec.readinessGates" && e.Operator == "Exists"
		}) {
			t.Errorf("stage %s is not limited to pods with readiness gates", name)
		}
	}
	gated := byName["pod-ready-gated"].Spec.Next.StatusTemplate
	if !strings.Contains(gated, "reason: ReadinessGatesNotReady") || strings.Contains(gated, "readinessGates") {
		t.Errorf("a gated pod's first status must leave Ready False and set no gate's condition:\n%s", gated)
	}
}
