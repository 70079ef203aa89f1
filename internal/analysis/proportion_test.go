package analysis

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// TestAbortsAreJudgedRelativeToStable: clients that give up are judged against the stable
// color's, as a proportion: a chat workload whose users stop generations on both colors passes,
// a stable color with no abort does not hold the rollout on a candidate's single one, and a
// candidate whose users give up far more often fails.
func TestAbortsAreJudgedRelativeToStable(t *testing.T) {
	m := v1alpha1.AnalysisMetric{Name: metrics.MetricAbortRatio, Query: "q", MaxRatioToStable: resource.NewMilliQuantity(1500, resource.DecimalSI)}
	ok := func(v float64) metrics.Sample { return metrics.Sample{Status: metrics.OK, Value: v} }
	for _, tc := range []struct {
		name           string
		pc, ps, nc, ns float64
		want           v1alpha1.Verdict
		wantMessage    string
	}{
		{"users who stop generations on both colors (20%) pass", 0.2, 0.21, 500, 4500, v1alpha1.VerdictPass, "abort-ratio 0.2 vs 1.5x stable 0.21"},
		{"one abort beside a stable color without any passes (a ratio would say nothing)", 0.002, 0, 500, 4500, v1alpha1.VerdictPass, ""},
		{"a candidate whose users give up five times as often fails", 0.1, 0.02, 500, 4500, v1alpha1.VerdictFail, "more than the stable color's"},
		{"a small excess on few requests passes", 0.04, 0.02, 100, 1000, v1alpha1.VerdictPass, ""},
		{"an excess below one percentage point never fails", 0.008, 0.001, 100000, 900000, v1alpha1.VerdictPass, ""},
		{"below minSamples it is inconclusive", 0.5, 0.02, 10, 4500, v1alpha1.VerdictInconclusive, "too few samples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := JudgeProportion(m, ok(tc.pc), ok(tc.ps), ok(tc.nc), ok(tc.ns), 20, Look{}, now)
			if r.Verdict != tc.want || !strings.Contains(r.Message, tc.wantMessage) {
				t.Errorf("verdict %s (%s), want %s containing %q", r.Verdict, r.Message, tc.want, tc.wantMessage)
			}
		})
	}
	// Without the stable color's request count there is no proportion to compare.
	if r := JudgeProportion(m, ok(0.1), ok(0.02), ok(500), metrics.Sample{Status: metrics.NoData}, 20, Look{}, now); r.Verdict != v1alpha1.VerdictInconclusive {
		t.Errorf("without the stable count: %s (%s), want Inconclusive", r.Verdict, r.Message)
	}
}
