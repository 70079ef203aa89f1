package autoscale

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
)

// learningSpec is a work metric targeting 0.9 per replica with capacity learning at 90% (a
// capacity of 1 before anything is learnt), TTFT SLO 2s, no stabilization.
func learningSpec() v1alpha1.AutoscalingSpec {
	pct := int32(90)
	return v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 100,
		Metrics: []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{
			Query: "work", Target: resource.MustParse("0.9"),
			LearnCapacity: &v1alpha1.CapacityLearning{TargetPercentOfCapacity: &pct, TimeToFirstTokenP95: dur(2 * time.Second)},
		}}},
		Behavior: v1alpha1.ScalingBehavior{ScaleDown: &v1alpha1.ScalingRules{StabilizationWindow: dur(0)}},
	}
}

func ok(v float64) Observation { return Observation{Status: sample.OK, Value: v} }

func learnt(t *testing.T, st v1alpha1.AutoscalingStatus) (float64, int32) {
	t.Helper()
	if len(st.LearnedCapacities) != 1 {
		t.Fatalf("learned capacities = %+v, want one", st.LearnedCapacities)
	}
	v, err := strconv.ParseFloat(st.LearnedCapacities[0].PerReplica, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v, st.LearnedCapacities[0].Samples
}

func TestALatencyMissBelowTheBelievedCapacityLowersTheTarget(t *testing.T) {
	// 10 Ready replicas carry 6 (0.6 each) with a p95 TTFT of 3s against 2s: one replica
	// carries at most 0.6 * 2/3 = 0.4, under the capacity of 1 the spec implies. Half-way:
	// 0.7, target 0.63, 6/0.63 = 9.5 is within the tolerance of 10.
	in := Input{Spec: learningSpec(), Current: 10, Ready: 10,
		Observations: []Observation{{Metric: MetricPrometheus, Status: sample.OK, Value: 6}},
		TTFTP95:      ok(3), RequestsWaiting: ok(0)}
	out := Decide(in, t0)
	c, n := learnt(t, out.Status)
	if c < 0.699 || c > 0.701 || n != 1 {
		t.Fatalf("capacity %v after %d samples, want 0.7 after 1", c, n)
	}
	p := out.Status.Proposals[0]
	if *p.Replicas != 10 || p.Target != "0.63 (90% of 0.7 learnt from the replicas beyond capacity)" {
		t.Fatalf("proposal %+v, want 10 replicas on the learnt target 0.63", p)
	}

	// The next pass, same miss: 0.55, target 0.495, 6/0.495 -> 13 replicas.
	in.Previous = &out.Status
	out = Decide(in, t0.Add(15*time.Second))
	if c, n = learnt(t, out.Status); c < 0.549 || c > 0.551 || n != 2 {
		t.Fatalf("capacity %v after %d samples, want 0.55 after 2", c, n)
	}
	if out.Desired != 13 || !strings.Contains(out.Status.LastScaleReason, "learnt from the replicas beyond capacity") {
		t.Fatalf("desired %d (%q), want 13 on the learnt target", out.Desired, out.Status.LastScaleReason)
	}

	// Meeting the SLO again teaches nothing and keeps what was learnt.
	in.Previous, in.TTFTP95, in.Current, in.Ready = &out.Status, ok(0.5), 13, 13
	out2 := Decide(in, t0.Add(30*time.Second))
	if c2, n2 := learnt(t, out2.Status); c2 != c || n2 != n {
		t.Fatalf("capacity %v (%d samples) after a good minute, want it kept at %v (%d)", c2, n2, c, n)
	}
}

func TestTheWorseLatencyRatioAndTheQueueBoundTheCapacity(t *testing.T) {
	spec := learningSpec()
	spec.Metrics[0].Prometheus.LearnCapacity.InterTokenLatencyP95 = dur(100 * time.Millisecond)
	for _, c := range []struct {
		name      string
		ttft, itl float64
		waiting   float64
		want      float64 // capacity after one pass, from 1: (1 + bound) / 2
	}{
		{"TTFT 1.5x the SLO: 0.6/1.5", 3, 0.05, 0, (1 + 0.4) / 2},
		{"ITL 2x the SLO, TTFT 1.5x: the worse", 3, 0.2, 0, (1 + 0.3) / 2},
		{"ITL 10x the SLO: never below half the load", 1, 1, 0, (1 + 0.3) / 2},
		{"requests queued, latency within: 90% of the load", 1, 0.05, 10, (1 + 0.54) / 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Spec: spec, Current: 10, Ready: 10,
				Observations: []Observation{{Metric: MetricPrometheus, Status: sample.OK, Value: 6}},
				TTFTP95:      ok(c.ttft), ITLP95: ok(c.itl), RequestsWaiting: ok(c.waiting)}
			got, _ := learnt(t, Decide(in, t0).Status)
			if math.Abs(got-c.want) > 1e-3 {
				t.Fatalf("capacity %v, want %v", got, c.want)
			}
		})
	}
}

func TestLearningOnlyLowersTheCapacity(t *testing.T) {
	// A miss at 1.5 per replica, 1.1x the SLO (a bound of 1.36), above the believed capacity
	// of 1, says nothing new.
	in := Input{Spec: learningSpec(), Current: 4, Ready: 4,
		Observations: []Observation{{Metric: MetricPrometheus, Status: sample.OK, Value: 6}},
		TTFTP95:      ok(2.2)}
	out := Decide(in, t0)
	if len(out.Status.LearnedCapacities) != 0 {
		t.Fatalf("learnt %+v from a load above the capacity", out.Status.LearnedCapacities)
	}
	if p := out.Status.Proposals[0]; p.Target != "0.9" || *p.Replicas != 7 {
		t.Fatalf("proposal %+v, want 7 on the spec's target 0.9", p)
	}
}

func TestLearningReadsQueuesAndLatencyButNotMissingDataOrStartingPods(t *testing.T) {
	work := []Observation{{Metric: MetricPrometheus, Status: sample.OK, Value: 5}}
	for _, c := range []struct {
		name  string
		in    Input
		learn bool
	}{
		{"requests queued, 1 per Ready replica", Input{Current: 10, Ready: 10, RequestsWaiting: ok(10)}, true},
		{"requests queued, under 1 per Ready replica", Input{Current: 10, Ready: 10, RequestsWaiting: ok(9)}, false},
		{"TTFT over the SLO", Input{Current: 10, Ready: 10, TTFTP95: ok(2.5)}, true},
		{"TTFT at the SLO", Input{Current: 10, Ready: 10, TTFTP95: ok(2)}, false},
		{"TTFT over the SLO, no data", Input{Current: 10, Ready: 10, TTFTP95: Observation{Status: sample.NoData, Value: 9}}, false},
		{"ITL has no SLO in the spec", Input{Current: 10, Ready: 10, ITLP95: ok(9)}, false},
		{"TTFT NaN", Input{Current: 10, Ready: 10, TTFTP95: ok(math.NaN())}, false},
		{"pods starting", Input{Current: 12, Ready: 10, Starting: 2, TTFTP95: ok(3)}, false},
		{"both colors Ready (a rollout)", Input{Current: 10, Ready: 10, BothColorsReady: true, TTFTP95: ok(3)}, false},
		{"no Ready pod", Input{Current: 10, Ready: 0, TTFTP95: ok(3)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Spec, in.Observations = learningSpec(), work
			out := Decide(in, t0)
			if got := len(out.Status.LearnedCapacities) == 1; got != c.learn {
				t.Fatalf("learnt = %v (%+v), want %v", got, out.Status.LearnedCapacities, c.learn)
			}
		})
	}
	// The work metric without data teaches nothing either.
	in := Input{Spec: learningSpec(), Current: 10, Ready: 10, TTFTP95: ok(3),
		Observations: []Observation{{Metric: MetricPrometheus, Status: sample.NoData}}}
	if out := Decide(in, t0); len(out.Status.LearnedCapacities) != 0 {
		t.Fatalf("learnt %+v without the metric's value", out.Status.LearnedCapacities)
	}
}

func TestRemovingLearnCapacityForgetsWhatWasLearnt(t *testing.T) {
	spec := learningSpec()
	prev := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricPrometheus, PerReplica: "0.5", Samples: 3}}}
	in := Input{Spec: spec, Current: 10, Ready: 10, Previous: prev,
		Observations: []Observation{{Metric: MetricPrometheus, Status: sample.OK, Value: 4.5}}}
	// With it: target 0.45, 4.5 -> 10 replicas, within tolerance of 10.
	if out := Decide(in, t0); out.Desired != 10 || len(out.Status.LearnedCapacities) != 1 {
		t.Fatalf("desired %d, learnt %+v; want 10 on the learnt target, kept", out.Desired, out.Status.LearnedCapacities)
	}
	in.Spec.Metrics[0].Prometheus.LearnCapacity = nil
	out := Decide(in, t0)
	if out.Desired != 5 || len(out.Status.LearnedCapacities) != 0 {
		t.Fatalf("desired %d, learnt %+v; want 5 on the spec's 0.9 and nothing learnt", out.Desired, out.Status.LearnedCapacities)
	}
}

func TestAnUnparsableLearntCapacityFallsBackToTheSpec(t *testing.T) {
	prev := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricPrometheus, PerReplica: "fast", Samples: 3}}}
	in := Input{Spec: learningSpec(), Current: 5, Ready: 5, Previous: prev,
		Observations: []Observation{{Metric: MetricPrometheus, Status: sample.OK, Value: 4.5}}}
	if out := Decide(in, t0); out.Desired != 5 || out.Status.Proposals[0].Target != "0.9" {
		t.Fatalf("desired %d target %q, want 5 on the spec's 0.9", out.Desired, out.Status.Proposals[0].Target)
	}
}

func TestAPromotionToAnotherRevisionForgetsTheCapacity(t *testing.T) {
	prev := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricPrometheus, PerReplica: "0.5", Samples: 3, Revision: "r1"}}}
	in := Input{Spec: learningSpec(), Current: 10, Ready: 10, Previous: prev, Revision: "r1",
		Observations: []Observation{{Metric: MetricPrometheus, Status: sample.OK, Value: 4.5}}}
	if out := Decide(in, t0); out.Desired != 10 || len(out.Status.LearnedCapacities) != 1 {
		t.Fatalf("same revision: desired %d, learnt %+v; want 10 on the learnt 0.45", out.Desired, out.Status.LearnedCapacities)
	}
	in.Revision = "r2"
	out := Decide(in, t0)
	if out.Desired != 5 || len(out.Status.LearnedCapacities) != 0 {
		t.Fatalf("after a promotion to r2: desired %d, learnt %+v; want 5 on the spec's 0.9, nothing learnt", out.Desired, out.Status.LearnedCapacities)
	}
	// What r2 teaches is recorded as r2's.
	in.Previous, in.TTFTP95 = &out.Status, ok(4)
	out = Decide(in, t0.Add(15*time.Second))
	if c := out.Status.LearnedCapacities; len(c) != 1 || c[0].Revision != "r2" || c[0].Samples != 1 {
		t.Fatalf("learnt %+v, want one sample recorded for r2", c)
	}
}

func TestALearntCapacityNeverRaisesTheSpecsTarget(t *testing.T) {
	// Learnt 0.8 when the spec said 0.9 at 90% (a capacity of 1); the spec now says 0.54 (a
	// capacity of 0.6): the spec's lower target holds, and a miss learns down from 0.6.
	spec := learningSpec()
	spec.Metrics[0].Prometheus.Target = resource.MustParse("0.54")
	prev := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricPrometheus, PerReplica: "0.8", Samples: 2}}}
	in := Input{Spec: spec, Current: 10, Ready: 10, Previous: prev,
		Observations: []Observation{{Metric: MetricPrometheus, Status: sample.OK, Value: 5.4}}}
	out := Decide(in, t0)
	if p := out.Status.Proposals[0]; p.Target != "0.54" || *p.Replicas != 10 {
		t.Fatalf("proposal %+v, want the spec's 0.54 and 10 replicas", p)
	}
	// 5.4 over 10 is 0.54 at 1.5x the TTFT SLO: a bound of 0.36; from 0.6 halfway: 0.48.
	in.TTFTP95 = ok(3)
	if c, _ := learnt(t, Decide(in, t0).Status); math.Abs(c-0.48) > 1e-3 {
		t.Fatalf("capacity %v, want 0.48 (halfway from the spec's 0.6 to 0.36)", c)
	}
}
