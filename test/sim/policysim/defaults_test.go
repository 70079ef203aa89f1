package policysim

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// The simulated rollout runs the defaults a stored ModelServer carries: the CRD's
// spec.rollout defaults for failureLimit, loadMatching and analysis.minSamples, read from the
// generated CRD, so that the judge's figures (make bench-sim) are those of what users run.
func TestModelshipRolloutRunsTheCRDsDefaults(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crd", "bases", "serving.modelship.dev_modelservers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions in the CRD, want 1", len(crd.Spec.Versions))
	}
	rollout := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.at(t, "spec", "rollout")
	r := NewModelshipRollout(4).ms.Spec.Rollout
	for _, c := range []struct {
		field string
		def   any
		sim   any
	}{
		{"failureLimit", rollout.at(t, "failureLimit").Default, float64(r.FailureLimit)},
		{"loadMatching", rollout.at(t, "loadMatching").Default, string(r.LoadMatching)},
		{"analysis.minSamples", rollout.at(t, "analysis", "minSamples").Default, float64(r.Analysis.MinSamples)},
	} {
		if c.def == nil || c.def != c.sim {
			t.Errorf("spec.rollout.%s: the simulator runs %v, the CRD defaults to %v", c.field, c.sim, c.def)
		}
	}
}

type schema struct {
	Default    any               `json:"default"`
	Properties map[string]schema `json:"properties"`
}

func (s schema) at(t *testing.T, path ...string) schema {
	t.Helper()
	for _, p := range path {
		next, ok := s.Properties[p]
		if !ok {
			t.Fatalf("no property %q in the CRD's schema", p)
		}
		s = next
	}
	return s
}
