package analysis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// partialProm speaks Prometheus' HTTP API: a bucket query gets a histogram whose p95 is under
// a second, any other query 0.01; with warn every answer also carries a Thanos partial-response
// warning, as when one store of several did not answer.
func partialProm(t *testing.T, warn bool) metrics.Querier {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		result := `[{"metric":{},"value":[1772366400,"0.01"]}]`
		if strings.Contains(r.Form.Get("query"), "_bucket") {
			result = `[{"metric":{"le":"0.5"},"value":[1772366400,"400"]},{"metric":{"le":"+Inf"},"value":[1772366400,"400"]}]`
		}
		warnings := ""
		if warn {
			warnings = `"warnings":["partial response: store-gw-2:10901: no such host"],`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success",` + warnings + `"data":{"resultType":"vector","result":` + result + `}}`))
	}))
	t.Cleanup(srv.Close)
	p, err := metrics.NewPrometheus(metrics.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A measurement answered with partial data is no data: every metric, scalar or histogram, is
// Inconclusive naming the warning, so the candidate is neither promoted nor rolled back on
// it; the same answers without the warning pass.
func TestRunReadsAPartialResponseAsNoData(t *testing.T) {
	spec := v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone, Metrics: []v1alpha1.AnalysisMetric{
		{Name: "error-rate", Query: `errors{pod=~"{{.Pods}}"}`, Max: ptr.To(resource.MustParse("0.05"))},
		{Name: "e2e-p95", Query: `p95{pod=~"{{.Pods}}"}`, Max: ptr.To(resource.MustParse("1")),
			Histogram: &v1alpha1.AnalysisHistogram{BucketQuery: `sum by (le) (x_bucket{pod=~"{{.Pods}}"})`, Percentile: 95}},
	}}

	results, err := Run(context.Background(), partialProm(t, true), spec, target, 2*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(spec.Metrics) {
		t.Fatalf("%d results for %d metrics: %+v", len(results), len(spec.Metrics), results)
	}
	for _, r := range results {
		if r.Verdict != v1alpha1.VerdictInconclusive || !strings.Contains(r.Message, "partial response") {
			t.Errorf("%s: %s %q, want Inconclusive naming the partial response", r.Name, r.Verdict, r.Message)
		}
	}

	results, err = Run(context.Background(), partialProm(t, false), spec, target, 2*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Verdict != v1alpha1.VerdictPass {
			t.Errorf("%s on the same answers without the warning: %s %q, want Pass", r.Name, r.Verdict, r.Message)
		}
	}
}
