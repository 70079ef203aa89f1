package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/modelship/modelship/test/sim/policysim"
)

// sloFirstPolicy is modelship's SLO-first autoscaling (spec.autoscaling.slo) in the matrix.
const sloFirstPolicy = "modelship-slo"

// workloadResults are one workload's results, by policy.
type workloadResults struct {
	name    string
	results map[string]policysim.Result
}

// reference is the policy every figure is relative to: the offline optimum (the oracle it
// replaced is gone).
func reference(r map[string]policysim.Result) (string, policysim.Result, bool) {
	x, ok := r["optimum"]
	return "optimum", x, ok
}

// printSLOFirstSummary prints, per workload, the SLO-first policy's SLO minutes and GPU-hours
// relative to the reference, beside HPA-70, modelship's GPU-70 and the token-work recipe, then
// the largest shortfalls over the matrix with the workload that sets each, and whether the
// target of #28 (SLO minutes at least 0.95 of the reference's on every workload, at most 1.3x
// its GPU-hours) is met. Nothing when the run has no SLO-first policy or no reference.
func printSLOFirstSummary(out io.Writer, ws []workloadResults) {
	type worst struct {
		v        float64
		workload string
	}
	var gap, share, gpu, osc worst
	share.v = 1e9
	n := 0
	for _, w := range ws {
		ms, ok := w.results[sloFirstPolicy]
		refName, ref, hasRef := reference(w.results)
		if !ok || !hasRef {
			continue
		}
		n++
		line := fmt.Sprintf("slo_first.%s reference=%s ref_slo_minutes=%.3f ref_gpu_hours=%.2f %s.slo_minutes=%.3f %s.slo_share_of_ref=%.3f %s.gpu_hours_vs_ref=%.3f",
			w.name, refName, ref.SLOMinutes, ref.GPUHours, sloFirstPolicy, ms.SLOMinutes, sloFirstPolicy, ratio(ms.SLOMinutes, ref.SLOMinutes), sloFirstPolicy, ratio(ms.GPUHours, ref.GPUHours))
		peers := make([]string, 0, len(w.results))
		for p := range w.results {
			peers = append(peers, p)
		}
		sort.Strings(peers)
		for _, p := range peers {
			if p == sloFirstPolicy || p == refName {
				continue
			}
			r := w.results[p]
			line += fmt.Sprintf(" %s.slo_minutes=%.3f %s.gpu_hours_vs_ref=%.3f", p, r.SLOMinutes, p, ratio(r.GPUHours, ref.GPUHours))
		}
		fmt.Fprintln(out, line)
		if g := ref.SLOMinutes - ms.SLOMinutes; g > gap.v || gap.workload == "" {
			gap = worst{g, w.name}
		}
		if s := ratio(ms.SLOMinutes, ref.SLOMinutes); s < share.v {
			share = worst{s, w.name}
		}
		if g := ratio(ms.GPUHours, ref.GPUHours); g > gpu.v {
			gpu = worst{g, w.name}
		}
		if h, ok := w.results["hpa-gpu70"]; ok {
			if o := ratio(ms.Oscillations, h.Oscillations); o > osc.v {
				osc = worst{o, w.name}
			}
		}
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(out, "slo_gap_max=%.3f workload=%s\n", gap.v, gap.workload)
	fmt.Fprintf(out, "slo_share_of_ref_min=%.3f workload=%s\n", share.v, share.workload)
	fmt.Fprintf(out, "gpu_hours_vs_ref_max=%.3f workload=%s\n", gpu.v, gpu.workload)
	fmt.Fprintf(out, "oscillations_vs_hpa_max=%.3f workload=%s\n", osc.v, osc.workload)
	fmt.Fprintf(out, "slo_first_target_met=%v (SLO minutes >= 0.95x the reference's on every workload at <= 1.3x its GPU-hours)\n", share.v >= 0.95 && gpu.v <= 1.3)
}
