package metrics

import (
	"strings"
	"testing"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func TestParseQueryPolicy(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    QueryPolicy
		wantErr string
	}{
		{"reads any", "any", QueryPolicyAny, ""},
		{"reads namespaced", "namespaced", QueryPolicyNamespaced, ""},
		{"reads presets", "presets", QueryPolicyPresets, ""},
		{"defaults to any", "", QueryPolicyAny, ""},
		{"refuses an unknown name and lists the known ones", "strict", "", "any, namespaced, presets"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseQueryPolicy(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseQueryPolicy(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestQueryPolicyCheckQuery(t *testing.T) {
	const scoped = `sum(rate(http_requests_total{namespace="{{.Namespace}}",pod=~"{{.Pods}}",code=~"5.."}[{{.Window}}])) / sum(rate(http_requests_total{namespace="{{.Namespace}}",pod=~"{{.Pods}}"}[{{.Window}}]))`
	cases := []struct {
		name    string
		policy  QueryPolicy
		query   string
		wantErr string // empty: allowed
	}{
		{"any runs a query reading every namespace", QueryPolicyAny, `sum(up)`, ""},
		{"presets refuses even a scoped query", QueryPolicyPresets, scoped, "query policy (presets)"},
		{"namespaced runs a query whose every selector is scoped to the template's namespace", QueryPolicyNamespaced, scoped, ""},
		{"namespaced runs a query scoped to the ModelServer's namespace written literally", QueryPolicyNamespaced, `max(vllm:num_requests_waiting{namespace="ml"})`, ""},
		{"namespaced refuses a selector without a namespace matcher and names it", QueryPolicyNamespaced, `sum(rate(x{namespace="{{.Namespace}}"}[1m])) / sum(rate(y[1m]))`, `y`},
		{"namespaced refuses a selector scoped to another namespace", QueryPolicyNamespaced, `max(vllm:num_requests_waiting{namespace="kube-system"})`, "namespace=\"{{.Namespace}}\""},
		{"namespaced refuses a regular-expression namespace matcher", QueryPolicyNamespaced, `max(up{namespace=~"ml|kube-system"})`, "does not"},
		{"namespaced refuses a negative namespace matcher", QueryPolicyNamespaced, `max(up{namespace!="other"})`, "does not"},
		{"namespaced refuses an unscoped selector hidden in a subquery", QueryPolicyNamespaced, `max_over_time(rate(up{namespace="ml"}[1m])[5m:1m]) + on() group_left() max(secret_metric)`, "secret_metric"},
		{"namespaced refuses a query that is not PromQL", QueryPolicyNamespaced, `sum(rate(x{namespace="{{.Namespace}}"}[1m]`, "parsing the rendered query"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.CheckQuery(tc.query, "ml")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// The presets' own queries satisfy the namespaced policy: a cluster that turns it on loses
// nothing it had by default.
func TestPresetQueriesAreNamespaced(t *testing.T) {
	for _, preset := range []v1alpha1.AnalysisPreset{v1alpha1.AnalysisPresetVLLM, v1alpha1.AnalysisPresetSGLang} {
		ms, sample := Preset(preset)
		for _, m := range ms {
			if err := QueryPolicyNamespaced.CheckQuery(m.Query, "ml"); err != nil {
				t.Errorf("%s %s: %v", preset, m.Name, err)
			}
		}
		if err := QueryPolicyNamespaced.CheckQuery(sample, "ml"); err != nil {
			t.Errorf("%s sample query: %v", preset, err)
		}
	}
}
