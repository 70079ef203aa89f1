package devenv

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// gateStages are devenv's own kwok Stages for pods with readiness gates, as a kubelet treats
// them: the containers become ready, and the pod Ready only while every gate's condition is
// True. kwok v0.8.0's pod-ready stage sets every gate's condition True itself, which would open
// modelship's warm-up gate (serving.modelship.dev/warm) before any warm-up check: it is run for
// pods without gates only (see kwokStages).
//
//go:embed kwok/*.yaml
var gateStages embed.FS

// kwokStages writes into dir the stages kwok runs with and returns their paths: KwokStages from
// assets, pod-ready.yaml limited to pods without readiness gates, and gateStages.
func kwokStages(assets, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kwok stages: %w", err)
	}
	var stages []string
	for _, name := range KwokStages {
		path := filepath.Join(assets, "kwok-stages", name)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("kwok stage: %w", err)
		}
		if name == "pod-ready.yaml" {
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("kwok stage: %w", err)
			}
			if data, err = withoutReadinessGates(data); err != nil {
				return nil, fmt.Errorf("kwok stage %s: %w", path, err)
			}
			path = filepath.Join(dir, name)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				return nil, fmt.Errorf("kwok stage: %w", err)
			}
		}
		stages = append(stages, path)
	}
	names, err := gateStages.ReadDir("kwok")
	if err != nil {
		return nil, fmt.Errorf("kwok stages: %w", err)
	}
	for _, n := range names {
		data, err := gateStages.ReadFile("kwok/" + n.Name())
		if err != nil {
			return nil, fmt.Errorf("kwok stage: %w", err)
		}
		path := filepath.Join(dir, n.Name())
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, fmt.Errorf("kwok stage: %w", err)
		}
		stages = append(stages, path)
	}
	return stages, nil
}

// withoutReadinessGates adds to a Stage's selector that the pod has no readiness gates.
func withoutReadinessGates(stage []byte) ([]byte, error) {
	var s map[string]any
	if err := yaml.Unmarshal(stage, &s); err != nil {
		return nil, err
	}
	spec, _ := s["spec"].(map[string]any)
	if spec == nil {
		return nil, fmt.Errorf("no spec")
	}
	sel, _ := spec["selector"].(map[string]any)
	if sel == nil {
		sel = map[string]any{}
		spec["selector"] = sel
	}
	exprs, _ := sel["matchExpressions"].([]any)
	sel["matchExpressions"] = append(exprs, map[string]any{"key": ".spec.readinessGates", "operator": "DoesNotExist"})
	return yaml.Marshal(s)
}
