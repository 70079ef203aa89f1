package metrics

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// gatewayVars are candidateVars with the gateway's keys: green's Service, the route as Traefik
// names it, and Traefik's namespace.
var gatewayVars = func() Vars {
	v := candidateVars
	v.Service, v.Route, v.GatewayNamespace = `llama-green`, TraefikName("llama"), "traefik"
	return v
}()

// promtoolEval checks with promtool that Prometheus's engine answers expr, over series given as
// promtool input series (series -> values, e.g. "0+10x10" over 15s steps), with exactly want
// (labels -> value; nil: nothing), at 2m.
func promtoolEval(t *testing.T, series map[string]string, expr string, want map[string]float64) {
	t.Helper()
	bin := os.Getenv("PROMTOOL")
	if bin == "" {
		p, err := exec.LookPath("promtool")
		if err != nil {
			t.Skip("no promtool: run `make test` (hack/prometheus.sh installs Debian's prometheus) or set PROMTOOL")
		}
		bin = p
	}
	var in []map[string]string
	for s, v := range series {
		in = append(in, map[string]string{"series": s, "values": v})
	}
	exp := []map[string]any{}
	for l, v := range want {
		exp = append(exp, map[string]any{"labels": l, "value": v})
	}
	doc, err := json.Marshal(map[string]any{"rule_files": []string{}, "evaluation_interval": "15s", "tests": []any{map[string]any{
		"interval": "15s", "input_series": in,
		"promql_expr_test": []any{map[string]any{"expr": expr, "eval_time": "2m", "exp_samples": exp}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "test.yml")
	if err := os.WriteFile(f, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "test", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("%s: promtool: %v\n%s", expr, err, strings.TrimSpace(string(out)))
	}
}

func TestTheGatewayQueriesParseAndReadOnlyTheGatewaysSeries(t *testing.T) {
	for _, tmpl := range []string{TraefikErrorRatio, TraefikRouteRequestRate} {
		q, err := Render(tmpl, gatewayVars)
		if err != nil {
			t.Fatal(err)
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			if vs, ok := node.(*parser.VectorSelector); ok && !strings.Contains(vs.String(), `namespace="traefik"`) {
				t.Errorf("selector %s does not pin the gateway's scrape target", vs)
			}
			return nil
		})
	}
}

func TestTheGatewayErrorRatioCountsTheColorsServiceAsTraefikNamesIt(t *testing.T) {
	q, err := Render(TraefikErrorRatio, gatewayVars)
	if err != nil {
		t.Fatal(err)
	}
	const (
		traefik = `job="traefik",namespace="traefik",pod="traefik-7d9f"`
		green   = `"ml-llama-green-http-8000@kubernetesgateway"`
		blue    = `"ml-llama-blue-http-8000@kubernetesgateway"`
		// A model server's pod in ml writing Traefik's names into its own exposition.
		forger = `job="ml/model-servers",namespace="ml",pod="llama-green-5f7c9d8b6-x2x7q"`
	)
	counter := func(labels, label, service, code string) string {
		return `traefik_service_requests_total{` + labels + `,` + label + `=` + service + `,code="` + code + `",method="POST",protocol="http"}`
	}
	cases := []struct {
		name   string
		series map[string]string
		want   map[string]float64
	}{
		{"5xx over all requests of green's Service, not blue's nor a forged series", map[string]string{
			counter(traefik, "service", green, "200"): "0+90x10",
			counter(traefik, "service", green, "502"): "0+6x10",
			counter(traefik, "service", green, "500"): "0+4x10",
			counter(traefik, "service", blue, "500"):  "0+100x10",
			counter(forger, "service", green, "500"):  "0+1000x10",
		}, map[string]float64{"{}": 0.1}},
		{"scraped through a ServiceMonitor, Traefik's label is exported_service", map[string]string{
			counter(traefik+`,service="traefik-metrics"`, "exported_service", green, "200"): "0+90x10",
			counter(traefik+`,service="traefik-metrics"`, "exported_service", green, "503"): "0+10x10",
		}, map[string]float64{"{}": 0.1}},
		{"no 5xx is 0", map[string]string{counter(traefik, "service", green, "200"): "0+90x10"}, map[string]float64{"{}": 0}},
		{"no request is no data, never 0", map[string]string{counter(traefik, "service", blue, "200"): "0+90x10"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { promtoolEval(t, tc.series, q, tc.want) })
	}
}

func TestTheGatewayRequestRateCountsTheRoutesRouters(t *testing.T) {
	q, err := Render(TraefikRouteRequestRate, gatewayVars)
	if err != nil {
		t.Fatal(err)
	}
	const traefik = `job="traefik",namespace="traefik",pod="traefik-7d9f"`
	router := func(name, code string) string {
		return `traefik_router_requests_total{` + traefik + `,router="` + name + `@kubernetesgateway",service="x",code="` + code + `",method="POST",protocol="http"}`
	}
	promtoolEval(t, map[string]string{
		// 15 requests per 15s to the route's router (served, and answered 503 with no endpoint).
		router("httproute-ml-llama-gw-gateway-system-inference-gateway-ep-web-0-1f2e3d4c5b6a7980", "200"): "0+10x10",
		router("httproute-ml-llama-gw-gateway-system-inference-gateway-ep-web-0-1f2e3d4c5b6a7980", "503"): "0+5x10",
		// Another route of the namespace whose name starts alike.
		router("httproute-ml-llama2-gw-gateway-system-inference-gateway-ep-web-0-0a0b0c0d0e0f0a0b", "200"): "0+100x10",
	}, q, map[string]float64{"{}": 1})
}

func TestGatewayMetricsJoinTheEffectiveMetrics(t *testing.T) {
	ms, _ := EffectiveMetrics(v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, Gateway: v1alpha1.GatewayMetricsTraefik})
	var found bool
	for _, m := range ms {
		if m.Name == MetricGatewayErrorRatio {
			found = m.Query == TraefikErrorRatio && sameQuantity(m.Max, "0.05")
		}
	}
	if !found || len(ms) != 5 {
		t.Errorf("effective metrics %+v, want the vllm preset's four and gateway-error-ratio at most 0.05", ms)
	}
	if ms, _ := EffectiveMetrics(v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM}); len(ms) != 4 {
		t.Errorf("without spec.rollout.analysis.gateway: %d metrics, want 4", len(ms))
	}
}

func TestTraefikNameIsHowItsProviderNamesRoutes(t *testing.T) {
	for in, want := range map[string]string{"llama": "llama", "llama.v2": "llama-v2", "a--b": "a-b", "chat-3.1_x": "chat-3-1-x"} {
		if got := TraefikName(in); got != want {
			t.Errorf("TraefikName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEnforceRunsTheBuiltInQueriesItIsGiven(t *testing.T) {
	q, err := Render(TraefikRouteRequestRate, gatewayVars)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	if s := Enforce(r, QueryPolicyNamespaced, "ml").Scalar(t.Context(), q, time.Time{}); s.Status != Error {
		t.Errorf("a query on the gateway's namespace ran under the namespaced policy without being built in: %+v", s)
	}
	if s := Enforce(r, QueryPolicyNamespaced, "ml", q).Scalar(t.Context(), q, time.Time{}); s.Status != OK {
		t.Errorf("the built-in gateway query did not run: %+v", s)
	}
	if s := Enforce(r, QueryPolicyNamespaced, "ml", q).Scalar(t.Context(), q+" or vector(1)", time.Time{}); s.Status != Error {
		t.Errorf("a query that only starts like the built-in one ran: %+v", s)
	}
}

// The saturation query, in Prometheus's engine: the share of the color's pods whose queue never
// emptied over the window (a pod serving two models counts by its emptier queue).
func TestTheSaturationQueryIsTheShareOfPodsWhoseQueueNeverEmptied(t *testing.T) {
	q, err := Render(SaturationQuery(v1alpha1.AnalysisPresetVLLM), Vars{Namespace: "ml", Name: "llama", Pods: PodRegex("llama-blue"), Window: "1m"})
	if err != nil {
		t.Fatal(err)
	}
	waiting := func(pod, model string) string {
		return `vllm:num_requests_waiting{namespace="ml",pod="` + pod + `",model_name="` + model + `"}`
	}
	promtoolEval(t, map[string]string{
		waiting("llama-blue-7d9f8c6b5-aaaaa", "m"):                                      "5x10",    // queued at every scrape
		waiting("llama-blue-7d9f8c6b5-bbbbb", "m"):                                      "3x7 0 3", // emptied inside the window
		waiting("llama-blue-7d9f8c6b5-ccccc", "m"):                                      "0x3 2x7", // emptied before the window only (a range that holds its left end, as Prometheus 2 does, sees none at 1m)
		waiting("llama-blue-7d9f8c6b5-ddddd", "m"):                                      "0x10",    // never queued
		waiting("llama-blue-7d9f8c6b5-eeeee", "a"):                                      "4x10",    // two models: one queue empty
		waiting("llama-blue-7d9f8c6b5-eeeee", "b"):                                      "0x10",    //
		waiting("llama-green-6c5b4a39f-fffff", "m"):                                     "9x10",    // the other color
		`vllm:num_requests_waiting{namespace="other",pod="llama-blue-7d9f8c6b5-ggggg"}`: "9x10",    // another namespace
	}, q, map[string]float64{"{}": 0.4})
}
