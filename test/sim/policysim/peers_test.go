package policysim

import (
	"math"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/fleet"
	"k8s.io/utils/ptr"
)

func gpu(s Signals) (float64, bool) { return s.GPUUtilization, s.HasGPU }

func at(sec int, pods, ready int32, util float64) Signals {
	return Signals{Now: time.Duration(sec) * time.Second, Pods: pods, Ready: ready, GPUUtilization: util, HasGPU: true}
}

func TestHPAFollowsItsDocumentedAlgorithm(t *testing.T) {
	cases := []struct {
		name  string
		steps []Signals
		want  []int32
	}{
		{name: "holds within the 10% tolerance", steps: []Signals{at(0, 4, 4, 76.9)}, want: []int32{4}},
		{name: "scales by ceil(pods * value/target) past the tolerance", steps: []Signals{at(0, 4, 4, 78)}, want: []int32{5}},
		{name: "scale-up is limited to 100% or 4 pods per period, the larger, then to maxReplicas", steps: []Signals{at(0, 2, 2, 700), at(15, 6, 6, 700)}, want: []int32{6, 10}},
		{name: "pods not Ready count as 0 when scaling up", steps: []Signals{at(0, 8, 4, 100)}, want: []int32{8}},
		{name: "holds the highest recommendation of the last 300s before scaling down",
			steps: []Signals{at(0, 10, 10, 70), at(15, 10, 10, 35), at(299, 10, 10, 35), at(300, 10, 10, 35)},
			want:  []int32{10, 10, 10, 5}},
		{name: "starts its history with the current count, so it does not scale down at once",
			steps: []Signals{at(0, 10, 10, 7), at(285, 10, 10, 7), at(300, 10, 10, 7)},
			want:  []int32{10, 10, 2}},
		{name: "holds without data", steps: []Signals{{Now: 0, Pods: 6, Ready: 0}}, want: []int32{6}},
		{name: "stays within maxReplicas", steps: []Signals{at(0, 9, 9, 700)}, want: []int32{10}},
		{name: "rises to minReplicas", steps: []Signals{at(0, 1, 1, 1)}, want: []int32{2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := NewHPA("hpa", 2, 10, 70, false, gpu)
			for i, s := range c.steps {
				if got := h.Decide(s); got != c.want[i] {
					t.Fatalf("step %d (%+v): %d replicas, want %d", i, s, got, c.want[i])
				}
			}
		})
	}
}

func TestKEDAPollsEvery30sAndHPAReadsTheLastPolledValue(t *testing.T) {
	k := NewKEDA(1, 20, 5)
	// t=0: polls 20 waiting -> ceil(20/5) = 4.
	if got := k.Decide(Signals{Now: 0, Pods: 2, Ready: 2, Waiting: 20}); got != 4 {
		t.Fatalf("t=0: %d, want 4", got)
	}
	// t=15s: the queue grew to 50, but KEDA has not polled again: the HPA still sees 20 (4 pods, on target).
	if got := k.Decide(Signals{Now: 15 * time.Second, Pods: 4, Ready: 4, Waiting: 50}); got != 4 {
		t.Fatalf("t=15s: %d, want 4 (value polled at t=0)", got)
	}
	// t=30s: polls 50 -> 10.
	if got := k.Decide(Signals{Now: 30 * time.Second, Pods: 4, Ready: 4, Waiting: 50}); got != 8 {
		t.Fatalf("t=30s: %d, want 8 (10 wanted, limited to +100%%)", got)
	}
	// Within the tolerance of the total (21 over 4 replicas of 5 is 1.05): holds.
	k2 := NewKEDA(1, 20, 5)
	if got := k2.Decide(Signals{Now: 0, Pods: 4, Ready: 4, Waiting: 21}); got != 4 {
		t.Fatalf("within tolerance: %d, want 4", got)
	}
}

// TestWorkBetweenIsTheReplicasWorthOfTheArrivals: fleet.Capacity.Work over a minute's arrivals.
func TestWorkBetweenIsTheReplicasWorthOfTheArrivals(t *testing.T) {
	c := fleet.DefaultCapacity()
	// 600 requests of 800 prompt tokens in a minute: 8,000 tokens/s, prefill 0.5, at most 0.5
	// of a step: 1 replica's work; decode 600*300/60 = 3,000 tokens/s = 1. Work max(1, 1.5) = 1.5.
	var arr []fleet.Arrival
	for i := range 600 {
		arr = append(arr, fleet.Arrival{At: time.Duration(i) * 100 * time.Millisecond, ContextTokens: 800, GeneratedTokens: 300})
	}
	if w := WorkBetween(arr, c, 0, time.Minute); math.Abs(w-1.5) > 1e-9 {
		t.Fatalf("work = %v, want 1.5", w)
	}
	if w := WorkBetween(arr, c, time.Minute, 2*time.Minute); w != 0 {
		t.Fatalf("work after the arrivals = %v, want 0", w)
	}
}

func TestDerivIsTheLeastSquaresSlope(t *testing.T) {
	xs := []sample{{0, 1}, {10 * time.Second, 3}, {20 * time.Second, 5}}
	if d, ok := Deriv(xs); !ok || math.Abs(d-0.2) > 1e-12 {
		t.Fatalf("deriv = %v, %v; want 0.2", d, ok)
	}
	if _, ok := Deriv(xs[:1]); ok {
		t.Fatal("one sample gave a slope")
	}
}

// fixed runs a given count from a given time.
type fixed struct {
	from time.Duration
	n    int32
}

func (f fixed) Name() string            { return "fixed" }
func (f fixed) Interval() time.Duration { return 15 * time.Second }
func (f fixed) Decide(s Signals) int32 {
	if s.Now >= f.from {
		return f.n
	}
	return s.Pods
}

func TestRunCountsGPUTimeAndNewPodsServeOnlyAfterTheColdStart(t *testing.T) {
	var arr []fleet.Arrival
	for i := range 20 * 60 * 5 {
		arr = append(arr, fleet.Arrival{At: time.Duration(i) * 200 * time.Millisecond, ContextTokens: 500, GeneratedTokens: 50})
	}
	cfg := Config{Arrivals: arr, Duration: 20 * time.Minute, Capacity: fleet.DefaultCapacity(), ColdStart: 3 * time.Minute,
		Initial: 2, ScrapeInterval: 15 * time.Second, Step: 50 * time.Millisecond, SLOTTFT: 2 * time.Second, SLOITL: 100 * time.Millisecond}
	r := Run(cfg, fixed{from: 5 * time.Minute, n: 4})
	// 2 GPUs for 5 minutes then 4 for 15: 70 GPU-minutes.
	if want := 70.0 / 60; math.Abs(r.GPUHours-want) > 1e-6 {
		t.Fatalf("GPU hours = %v, want %v", r.GPUHours, want)
	}
	if r.ScaleEvents != 1 || r.Oscillations != 0 {
		t.Fatalf("scale events %d, oscillations %v; want 1, 0", r.ScaleEvents, r.Oscillations)
	}
	for _, m := range r.Timeline {
		switch {
		case m.At <= 5*time.Minute && m.Serving != 2, m.At > 5*time.Minute && m.At < 8*time.Minute && m.Serving != 2,
			m.At >= 8*time.Minute+15*time.Second && m.Serving != 4:
			t.Fatalf("minute %s: %d serving, want the new pods serving only 3 minutes after the scale-up", m.At, m.Serving)
		}
	}
	if r.Requests != len(arr) || r.SLOMinutes != 1 {
		t.Fatalf("requests %d (want %d), SLO minutes %v (want 1 at this light load)", r.Requests, len(arr), r.SLOMinutes)
	}
}

// overProvisioned is 16 minutes of a steady 10 requests/s on 6 pods, more than the load
// needs, with the pods' metrics out from 2m to 14m as outage says.
func overProvisioned(outage Outage) Config {
	var arr []fleet.Arrival
	for i := range 16 * 60 * 10 {
		arr = append(arr, fleet.Arrival{At: time.Duration(i) * 100 * time.Millisecond, ContextTokens: 1000, GeneratedTokens: 200})
	}
	outage.From, outage.To = 2*time.Minute, 14*time.Minute
	return Config{Arrivals: arr, Duration: 16 * time.Minute, Capacity: fleet.DefaultCapacity(), ColdStart: time.Minute,
		Initial: 6, ScrapeInterval: 15 * time.Second, Step: 50 * time.Millisecond, SLOTTFT: 2 * time.Second, SLOITL: 100 * time.Millisecond,
		Outages: []Outage{outage}}
}

func TestDuringAMetricsOutageModelshipAndHPAHoldTheirCount(t *testing.T) {
	cfg := overProvisioned(Outage{})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	policies := []Policy{
		&Modelship{Label: "modelship", Start: start, Spec: v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 20}},
		NewHPA("hpa", 1, 20, 70, false, gpu),
	}
	for _, p := range policies {
		r := Run(cfg, p)
		at2 := r.Timeline[1].Pods
		for _, m := range r.Timeline[2:13] {
			if m.Pods != at2 {
				t.Fatalf("%s: %d pods at %s during the outage, want %d held", p.Name(), m.Pods, m.At, at2)
			}
		}
	}
	// Without the outage both would have scaled down the over-provisioned 6 pods: the hold is the outage's doing.
	cfg.Outages = nil
	for _, p := range []Policy{
		&Modelship{Label: "modelship", Start: start, Spec: v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 20}},
		NewHPA("hpa", 1, 20, 70, false, gpu),
	} {
		if r := Run(cfg, p); r.Timeline[12].Pods >= 6 {
			t.Fatalf("%s without an outage: %d pods at 13m, want fewer than the 6 it started with", p.Name(), r.Timeline[12].Pods)
		}
	}
}

// TestOnNaNSamplesModelshipAndHPAHoldWhileKEDAReadsZero: the same load with the pods' series
// reporting NaN for 12 minutes. modelship (NaN is no value) and the HPA (a NaN sample fails the
// metrics API read) hold; KEDA's Prometheus scaler reads NaN as 0 (ignoreNullValues) and
// scales down to its minimum under a load that needs more.
func TestOnNaNSamplesModelshipAndHPAHoldWhileKEDAReadsZero(t *testing.T) {
	cfg := overProvisioned(Outage{NaN: true})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	work := func(s Signals) float64 { return cfg.Capacity.Work(s.PromptTPS, s.GeneratedTPS) }
	for _, p := range []Policy{
		&Modelship{Label: "modelship-gpu", Start: start, Spec: v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 20}},
		&Modelship{Label: "modelship-recipe", Start: start, Work: work, Spec: RecipeSpec(1, 20, time.Minute, 0.57, 2, 3*time.Minute, 0, 0.1)},
		NewHPA("hpa", 1, 20, 70, false, gpu),
	} {
		r := Run(cfg, p)
		at2 := r.Timeline[1].Pods
		for _, m := range r.Timeline[2:13] {
			if m.Pods != at2 {
				t.Fatalf("%s: %d pods at %s while the samples are NaN, want %d held", p.Name(), m.Pods, m.At, at2)
			}
		}
	}
	k := Run(cfg, NewKEDA(1, 20, 5))
	if got := k.Timeline[12].Pods; got != 1 {
		t.Fatalf("KEDA: %d pods at 13m after 11 minutes of NaN, want its minimum 1 (NaN read as 0)", got)
	}
	cfg.Outages = nil
	if got := Run(cfg, NewKEDA(1, 20, 5)).Timeline[12].Pods; got <= 1 {
		t.Fatalf("KEDA without NaN: %d pods at 13m; the scale-down must be the NaN's doing", got)
	}
}
