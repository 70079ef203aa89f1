package analysis

import (
	"fmt"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// SaturatedShare is the share of the stable color's pods whose queue never emptied over the
// window (metrics.SaturationQuery) at and above which the stable color is saturated.
const SaturatedShare = 0.5

// HoldIfSaturated turns the latency verdicts of a measurement into Inconclusive when the stable
// color is saturated: most of its pods had requests waiting at every scrape of the window (their
// queue never emptied), so it serves less than it is sent. A model server's latency then says
// how far over its capacity it runs, not how fast its version is: near saturation, a few percent
// more load per pod (the candidate's pods are rounded up from its weight, and the stable color
// came into the overload with the queue it had built) doubles the time per token of a full
// batch, and an identical candidate is slower or faster than the stable color by more than any
// bound (the simulator rolled back 194 of 200 identical candidates on the shipped trace at 18x
// over 8 pods, on itl-p95 and decode-per-token). Neither a rollback nor a promotion would be
// judged on the versions: the step holds, as on missing data, until the queue drains.
//
// Held are the metrics judged on latency or against the stable color (a histogram, a per-unit
// metric or a relative bound); an absolute bound on a plain query (error-ratio) is judged as
// usual. share is the saturation query's value for the stable color: not OK (no such gauge,
// Prometheus down) is not saturated, since the guard cannot tell, and the verdicts stand.
// results and ms are matched by name; results is returned, changed in place.
func HoldIfSaturated(ms []v1alpha1.AnalysisMetric, results []v1alpha1.MetricResult, share metrics.Sample) []v1alpha1.MetricResult {
	if share.Status != metrics.OK || share.Value < SaturatedShare {
		return results
	}
	held := map[string]bool{}
	for _, m := range ms {
		held[m.Name] = m.Histogram != nil || m.PerUnit != nil || m.MaxRatioToStable != nil
	}
	for i, r := range results {
		if !held[r.Name] || r.Verdict == v1alpha1.VerdictInconclusive {
			continue
		}
		results[i].Message = fmt.Sprintf("held, %s would have been %s: the stable color is saturated (the queue never emptied over the window on %.0f%% of its pods), so latency measures the overload, not the version; the step holds until the queue drains",
			r.Name, verdictWord(r), 100*share.Value)
		results[i].Verdict = v1alpha1.VerdictInconclusive
		if r.Confident != nil {
			results[i].Confident = new(bool)
		}
	}
	return results
}

// verdictWord is a held result's verdict for its message: "a pass" or "a failure (...)".
func verdictWord(r v1alpha1.MetricResult) string {
	if r.Verdict == v1alpha1.VerdictFail {
		return "a failure (" + r.Message + ")"
	}
	return "a pass"
}
