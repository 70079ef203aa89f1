package controller

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/modelship/modelship/internal/telemetry"
)

// dashboardQueries reads every PromQL expression of the Grafana dashboard: the panels' targets
// and the template variables' label_values(...) queries.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "grafana", "modelship.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*[a-z_]+\)$`)
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch v := x.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && (k == "expr" || k == "query") {
					if m := labelValues.FindStringSubmatch(s); m != nil {
						out = append(out, m[1])
					} else if k == "expr" {
						out = append(out, s)
					}
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(dash)
	return out
}

// grafanaVars replaces the dashboard's variables by values PromQL parses.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$ttft_slo", "2", "$namespace", "ns", "$modelserver", "llama")

// modelServerSeries are the series the model servers, the GPUs' exporter (DCGM) and the
// endpoint picker serve, not the controller. The test module checks that the fleet simulator
// serves every one the dashboard queries (test/framework/fleet's
// TestServesEveryModelServerSeriesTheDashboardQueries).
var modelServerSeries = regexp.MustCompile(`^(vllm:|DCGM_|inference_pool_|inference_objective_)`)

// TestEveryMetricTheDashboardQueriesIsServed parses each PromQL expression of
// config/grafana/modelship.json and checks every metric it selects against what is really
// served: the running controller's /metrics registry (controller-runtime's and modelship's
// metrics, after a ModelServer was reconciled) and modelship's own metrics; the model
// servers', GPUs' and endpoint picker's series are the fleet simulator's (modelServerSeries).
func TestEveryMetricTheDashboardQueriesIsServed(t *testing.T) {
	ms := newModelServer(newNamespace(t), "dash")
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for !served["controller_runtime_reconcile_time_seconds"] {
		if time.Now().After(deadline) {
			t.Fatal("the controller's registry has no reconcile histogram after a ModelServer was reconciled")
		}
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			served[f.GetName()] = true
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, n := range telemetry.MetricNames() {
		served[n] = true
	}

	queries := dashboardQueries(t)
	if len(queries) < 10 {
		t.Fatalf("only %d queries found in the dashboard", len(queries))
	}
	suffix := regexp.MustCompile(`_(bucket|sum|count)$`)
	checked := 0
	for _, q := range queries {
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(q))
		if err != nil {
			t.Errorf("the dashboard's query does not parse: %s: %v", q, err)
			continue
		}
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			vs, ok := node.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			checked++
			if !served[vs.Name] && !served[suffix.ReplaceAllString(vs.Name, "")] && !modelServerSeries.MatchString(vs.Name) {
				t.Errorf("the dashboard queries %s (in %s), which neither the controller nor a model server serves", vs.Name, q)
			}
			return nil
		})
	}
	if checked < 15 {
		t.Errorf("only %d metric selectors checked", checked)
	}
}
