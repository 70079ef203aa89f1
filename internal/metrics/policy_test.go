package metrics

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

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
		{"defaults to namespaced", "", QueryPolicyNamespaced, ""},
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
		{"no policy is namespaced", "", `max(vllm:num_requests_waiting)`, "query policy (namespaced)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.CheckQuery(tc.query, varsOf("ml", "llama")...)
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

// varsOf are the values the ModelServer namespace/name's analysis queries run with, one per color.
func varsOf(namespace, name string) []Vars {
	var out []Vars
	for _, c := range []string{"blue", "green"} {
		out = append(out, Vars{Namespace: namespace, Name: name, Color: c, Revision: "0123456789",
			Pods: PodRegex(name + "-" + c), Pool: regexp.QuoteMeta(name + "-" + c), Window: "2m"})
	}
	return out
}

// A key outside a string literal changes the parse with the ModelServer's own values: for a
// ModelServer named "or", x{namespace="ml"} {{.Pool}} runs as x{namespace="ml"} or -blue, which
// reads the series blue of every namespace. Placeholder values (an empty pool) parse it as a
// scoped x alone.
func TestNamespacedJudgesTheQueryAsItRuns(t *testing.T) {
	const tmpl = `vllm:num_requests_waiting{namespace="{{.Namespace}}"} {{.Pool}}`
	err := QueryPolicyNamespaced.CheckQuery(tmpl, varsOf("ml", "or")...)
	if err == nil || !strings.Contains(err.Error(), "query policy (namespaced)") || !strings.Contains(err.Error(), "blue") {
		t.Errorf("the template for a ModelServer named or: %v, want refused naming the unscoped selector blue", err)
	}
	rendered, err := Render(tmpl, varsOf("ml", "or")[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []QueryPolicy{QueryPolicyNamespaced, QueryPolicyPresets, ""} {
		if err := p.CheckRendered(rendered, "ml"); err == nil || !strings.Contains(err.Error(), "blue") {
			t.Errorf("%q about to run under %q: %v, want refused naming blue", rendered, p, err)
		}
	}
	if err := QueryPolicyAny.CheckRendered(rendered, "ml"); err != nil {
		t.Errorf("any refused %q: %v", rendered, err)
	}
	if err := QueryPolicyPresets.CheckRendered(`max(vllm:num_requests_waiting{namespace="ml",pod=~"llama-blue-.+"})`, "ml"); err != nil {
		t.Errorf("presets refused a query scoped to the namespace as it runs: %v", err)
	}
}

// recorder is a Querier that records the queries sent to it.
type recorder struct{ sent []string }

func (r *recorder) Scalar(_ context.Context, q string, _ time.Time) Sample {
	r.sent = append(r.sent, q)
	return Sample{Status: OK, Value: 1}
}

func (r *recorder) Vector(_ context.Context, q string, _ time.Time) ([]Series, error) {
	r.sent = append(r.sent, q)
	return nil, nil
}

func TestEnforceSendsOnlyWhatThePolicyRuns(t *testing.T) {
	r := &recorder{}
	q := Enforce(r, QueryPolicyNamespaced, "ml")
	scoped, unscoped := `sum(x{namespace="ml"})`, `sum(x{namespace="ml"}) or -blue`
	if s := q.Scalar(context.Background(), scoped, time.Time{}); s.Status != OK {
		t.Errorf("a scoped query answered %+v", s)
	}
	if s := q.Scalar(context.Background(), unscoped, time.Time{}); s.Status != Error || !strings.Contains(s.Message, "query policy (namespaced)") {
		t.Errorf("an unscoped query answered %+v, want an error naming the policy", s)
	}
	if _, err := q.Vector(context.Background(), unscoped, time.Time{}); err == nil {
		t.Error("an unscoped vector query ran")
	}
	if len(r.sent) != 1 || r.sent[0] != scoped {
		t.Errorf("sent %q, want the scoped query only", r.sent)
	}
	if Enforce(r, QueryPolicyAny, "ml") != Querier(r) {
		t.Error("any checks queries")
	}
}

func TestOnlyAnyReadsExternalMetrics(t *testing.T) {
	if err := QueryPolicyAny.CheckExternal(); err != nil {
		t.Errorf("any: %v", err)
	}
	for _, p := range []QueryPolicy{QueryPolicyNamespaced, QueryPolicyPresets, ""} {
		if err := p.CheckExternal(); err == nil || !strings.Contains(err.Error(), "external metrics") {
			t.Errorf("%q: %v, want refused", p, err)
		}
	}
}

// The presets' own queries satisfy the namespaced policy: a cluster that turns it on loses
// nothing it had by default.
func TestPresetQueriesAreNamespaced(t *testing.T) {
	for _, preset := range []v1alpha1.AnalysisPreset{v1alpha1.AnalysisPresetVLLM, v1alpha1.AnalysisPresetSGLang} {
		ms, sample := Preset(preset)
		for _, m := range ms {
			if err := QueryPolicyNamespaced.CheckQuery(m.Query, varsOf("ml", "llama")...); err != nil {
				t.Errorf("%s %s: %v", preset, m.Name, err)
			}
			if m.Histogram != nil {
				if err := QueryPolicyNamespaced.CheckQuery(m.Histogram.BucketQuery, varsOf("ml", "llama")...); err != nil {
					t.Errorf("%s %s bucket query: %v", preset, m.Name, err)
				}
			}
		}
		if err := QueryPolicyNamespaced.CheckQuery(sample, varsOf("ml", "llama")...); err != nil {
			t.Errorf("%s sample query: %v", preset, err)
		}
		if err := QueryPolicyNamespaced.CheckQuery(SaturationQuery(preset), varsOf("ml", "llama")...); err != nil {
			t.Errorf("%s saturation query: %v", preset, err)
		}
	}
	// The latency SLOs of learnCapacity and spec.autoscaling.slo, and the SLO's token work, run
	// on the ModelServer's behalf too.
	for name, q := range map[string]string{"VLLMTTFTP95": VLLMTTFTP95, "VLLMITLP95": VLLMITLP95, "SGLangTTFTP95": SGLangTTFTP95, "SGLangITLP95": SGLangITLP95,
		"VLLMTokenWork": VLLMTokenWork, "SGLangTokenWork": SGLangTokenWork} {
		if err := QueryPolicyNamespaced.CheckQuery(q, varsOf("ml", "llama")...); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
