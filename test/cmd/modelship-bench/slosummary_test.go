package main

import (
	"strings"
	"testing"

	"github.com/modelship/modelship/test/sim/policysim"
)

// The summary reports the SLO-first policy against the optimum, names the workload that sets each worst figure, and says whether #28's
// target holds.
func TestSLOFirstSummary(t *testing.T) {
	res := func(slo, gpu, osc float64) policysim.Result {
		return policysim.Result{SLOMinutes: slo, GPUHours: gpu, Oscillations: osc}
	}
	ws := []workloadResults{
		{"a", map[string]policysim.Result{"optimum": res(1, 10, 0), sloFirstPolicy: res(0.98, 12, 4), "hpa-gpu70": res(0.9, 9, 2)}},
		{"b", map[string]policysim.Result{"optimum": res(0.8, 20, 0), sloFirstPolicy: res(0.72, 28, 1), "hpa-gpu70": res(0.7, 18, 1)}},
	}
	var b strings.Builder
	printSLOFirstSummary(&b, ws)
	out := b.String()
	for _, want := range []string{
		"slo_first.a reference=optimum ref_slo_minutes=1.000",
		"modelship-slo.gpu_hours_vs_ref=1.200 hpa-gpu70.slo_minutes=0.900",
		"slo_first.b reference=optimum",
		"slo_gap_max=0.080 workload=b",
		"slo_share_of_ref_min=0.900 workload=b",
		"gpu_hours_vs_ref_max=1.400 workload=b",
		"oscillations_vs_hpa_max=2.000 workload=a",
		"slo_first_target_met=false",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	// Within every target: met. A policy that turns where HPA-70 never does is not.
	b.Reset()
	met := []workloadResults{{"a", map[string]policysim.Result{"optimum": res(1, 10, 0), sloFirstPolicy: res(0.995, 11.4, 2), "hpa-gpu70": res(0.9, 9, 2)}}}
	printSLOFirstSummary(&b, met)
	if !strings.Contains(b.String(), "slo_first_target_met=true") {
		t.Errorf("within the targets, the summary says:\n%s", b.String())
	}
	b.Reset()
	met[0].results["hpa-gpu70"] = res(0.9, 9, 0)
	printSLOFirstSummary(&b, met)
	if !strings.Contains(b.String(), "oscillations_vs_hpa_max=+Inf workload=a") || !strings.Contains(b.String(), "slo_first_target_met=false") {
		t.Errorf("turning where HPA-70 never does, the summary says:\n%s", b.String())
	}
	b.Reset()
	printSLOFirstSummary(&b, []workloadResults{{"c", map[string]policysim.Result{"optimum": res(1, 1, 0)}}})
	if b.Len() != 0 {
		t.Errorf("a run without the SLO-first policy printed %q", b.String())
	}
}
