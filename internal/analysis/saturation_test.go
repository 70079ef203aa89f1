package analysis

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

func TestHoldIfSaturatedHoldsOnlyLatencyAndRelativeVerdicts(t *testing.T) {
	max := resource.MustParse("0.05")
	ratio := resource.MustParse("1.2")
	ms := []v1alpha1.AnalysisMetric{
		{Name: "itl-p95", Histogram: &v1alpha1.AnalysisHistogram{}, MaxRatioToStable: &ratio},
		{Name: "decode-per-token", PerUnit: &v1alpha1.AnalysisPerUnit{}, MaxRatioToStable: &ratio},
		{Name: "abort-ratio", MaxRatioToStable: &ratio},
		{Name: "error-ratio", Max: &max},
		{Name: "ttft-p95", Histogram: &v1alpha1.AnalysisHistogram{}, Max: &max},
	}
	results := func() []v1alpha1.MetricResult {
		return []v1alpha1.MetricResult{
			{Name: "itl-p95", Verdict: v1alpha1.VerdictFail, Message: "itl-p95 0.09 > 0.07"},
			{Name: "decode-per-token", Verdict: v1alpha1.VerdictPass, Confident: ptr.To(true)},
			{Name: "abort-ratio", Verdict: v1alpha1.VerdictInconclusive, Message: "stable: no data"},
			{Name: "error-ratio", Verdict: v1alpha1.VerdictFail, Message: "error-ratio 0.3 > 0.05"},
			{Name: "ttft-p95", Verdict: v1alpha1.VerdictFail, Message: "ttft-p95 40 > 0.05"},
		}
	}
	for _, tc := range []struct {
		name  string
		share metrics.Sample
		want  []v1alpha1.Verdict
	}{
		{"saturated", metrics.Sample{Status: metrics.OK, Value: 0.875},
			[]v1alpha1.Verdict{v1alpha1.VerdictInconclusive, v1alpha1.VerdictInconclusive, v1alpha1.VerdictInconclusive, v1alpha1.VerdictFail, v1alpha1.VerdictInconclusive}},
		{"at the share", metrics.Sample{Status: metrics.OK, Value: SaturatedShare},
			[]v1alpha1.Verdict{v1alpha1.VerdictInconclusive, v1alpha1.VerdictInconclusive, v1alpha1.VerdictInconclusive, v1alpha1.VerdictFail, v1alpha1.VerdictInconclusive}},
		{"a minority queued", metrics.Sample{Status: metrics.OK, Value: 0.375},
			[]v1alpha1.Verdict{v1alpha1.VerdictFail, v1alpha1.VerdictPass, v1alpha1.VerdictInconclusive, v1alpha1.VerdictFail, v1alpha1.VerdictFail}},
		{"no gauge", metrics.Sample{Status: metrics.NoData, Message: "no data"},
			[]v1alpha1.Verdict{v1alpha1.VerdictFail, v1alpha1.VerdictPass, v1alpha1.VerdictInconclusive, v1alpha1.VerdictFail, v1alpha1.VerdictFail}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := HoldIfSaturated(ms, results(), tc.share)
			for i, r := range got {
				if r.Verdict != tc.want[i] {
					t.Errorf("%s: %s (%q), want %s", r.Name, r.Verdict, r.Message, tc.want[i])
				}
			}
			if held := got[1].Verdict == v1alpha1.VerdictInconclusive; got[1].Confident == nil || *got[1].Confident == held {
				t.Errorf("decode-per-token %s with confident %v: a held pass is not confident, a pass kept is", got[1].Verdict, got[1].Confident)
			}
			if tc.share.Status == metrics.OK && tc.share.Value >= SaturatedShare {
				if got[2].Message != "stable: no data" {
					t.Errorf("an inconclusive result's message changed: %q", got[2].Message)
				}
				if want := "held, itl-p95 would have been a failure (itl-p95 0.09 > 0.07): the stable color is saturated (the queue never emptied over the window on 88% of its pods), so latency measures the overload, not the version; the step holds until the queue drains"; tc.share.Value > SaturatedShare && got[0].Message != want {
					t.Errorf("message = %q, want %q", got[0].Message, want)
				}
			}
		})
	}
}
