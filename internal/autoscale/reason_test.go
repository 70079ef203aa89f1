package autoscale

import (
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
)

// The e2e Prometheus-outage story (mid-rollout at 50/50, a total of 5 replicas, so 10 Ready
// pods of both colors, GPU utilization 14-25% of a 40% target) recorded a recommendation of 7
// right after Prometheus came back, and the scale event read "5 -> 7: gpuUtilization 24.9 <
// target 40". Replayed through Decide: data, a minute without it, data again. The 7 is the
// ratio rule over the pods the average was measured on: 10 pods at 24.9% are 2.49 GPUs of
// work, 6.2 replicas at 40% once one color carries it (5 pods at 49.8%). Nothing of the outage
// raises it: the passes without data record nothing, and the first pass back asks for what
// the data asks for. What was wrong is the reason, which gave the per-pod comparison only.
func TestAUtilizationBelowTargetOverBothColorsAsksForTheTotalsWorkAndSaysSo(t *testing.T) {
	spec := newSpec(1, 8, withGPU(40))
	cur := int32(5)
	var prev *v1alpha1.AutoscalingStatus
	step := func(at time.Duration, o Observation) Output {
		out := Decide(Input{Spec: spec, Current: cur, Ready: 10, BothColorsReady: true, Observations: []Observation{o}, Previous: prev}, t0.Add(at))
		st := out.Status
		prev, cur = &st, out.Desired
		return out
	}
	for i, u := range []float64{18, 19.5, 17} { // before the outage: within 10 x u/40 <= 5.5 (tolerance)
		if out := step(time.Duration(i)*15*time.Second, obs(MetricGPUUtilization, u, 10)); out.Desired != 5 {
			t.Fatalf("before the outage, %.1f%% on 10 pods: %d, want 5 held", u, out.Desired)
		}
	}
	nRecs := len(prev.Recommendations)
	for i := 0; i < 4; i++ { // the outage
		out := step(time.Minute+time.Duration(i)*15*time.Second, missingObs(MetricGPUUtilization, sample.Error))
		if out.Desired != 5 || len(out.Status.Recommendations) != nRecs {
			t.Fatalf("during the outage: %d, %d recommendations (was %d): want 5 held and nothing recorded", out.Desired, len(out.Status.Recommendations), nRecs)
		}
	}
	out := step(2*time.Minute, obs(MetricGPUUtilization, 24.9, 10))
	if out.Desired != 7 {
		t.Fatalf("back, 24.9%% on 10 pods for a total of 5: %d, want 7 (2.49 GPUs of work at 40%%)", out.Desired)
	}
	r := out.Status.LastScaleReason
	if !strings.Contains(r, "10 Ready pods") || !strings.Contains(r, "6.225") {
		t.Errorf("reason %q: want it to say the average is over 10 Ready pods, 6.225 replicas' worth at target", r)
	}
	// The same utilization on 5 pods for a total of 5 would not say so: the pods are the count.
	one := Decide(Input{Spec: spec, Current: 5, Ready: 5, Observations: []Observation{obs(MetricGPUUtilization, 80, 5)}}, t0)
	if strings.Contains(one.Status.LastScaleReason, "Ready pods") {
		t.Errorf("reason %q with as many pods as replicas: want the plain comparison", one.Status.LastScaleReason)
	}
}

// When the scale-down stabilization window keeps the count above this pass's proposal, the
// reason names the recommendation the count follows (its count, time and metric), not only the
// proposal of the pass.
func TestTheScaleReasonNamesTheRecommendationTheWindowFollows(t *testing.T) {
	spec := newSpec(1, 10, withGPU(40), withScaleDown(5*time.Minute, ""))
	// 8 until 6m ago, out of the window; 6 from then until 1m ago, within it; then 3.
	prev := &v1alpha1.AutoscalingStatus{Recommendations: []v1alpha1.Recommendation{
		{At: rec(7*time.Minute, 8).At, Replicas: 8, Metric: MetricGPUUtilization},
		{At: rec(6*time.Minute, 6).At, Replicas: 6, Metric: MetricGPUUtilization},
		{At: rec(time.Minute, 3).At, Replicas: 3, Metric: MetricGPUUtilization},
	}}
	out := Decide(Input{Spec: spec, Current: 8, Ready: 8, Observations: []Observation{obs(MetricGPUUtilization, 10, 8)}, Previous: prev}, t0)
	if out.Desired != 6 {
		t.Fatalf("Desired %d, want 6 (the window's highest)", out.Desired)
	}
	r := out.Status.LastScaleReason
	want := "follows the recommendation of 6 at " + rec(6*time.Minute, 6).At.UTC().Format(time.RFC3339) + " (gpuUtilization)"
	if !strings.Contains(r, want) || !strings.Contains(r, "scale-down stabilization window 5m0s") || !strings.Contains(r, "gpuUtilization 10 < target 40") {
		t.Errorf("reason %q: want %q, the window, and this pass's proposal", r, want)
	}
	if got := out.Status.Recommendations[len(out.Status.Recommendations)-1]; got.Replicas != 2 || got.Metric != MetricGPUUtilization {
		t.Errorf("last recommendation %+v: want 2 recorded with its metric", got)
	}
	if out.Event == nil || !strings.Contains(out.Event.Message, want) {
		t.Errorf("event %+v: want the same reason", out.Event)
	}
}
