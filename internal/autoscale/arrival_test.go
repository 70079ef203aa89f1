package autoscale

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// burstSpec is sloSpecOf with a 3-minute cold start (projectionHorizon) and, unless
// defaultRates, a scale-up rate limit that lets the fleet grow tenfold in one pass.
func burstSpec(defaultRates bool) v1alpha1.AutoscalingSpec {
	spec := sloSpecOf(1, 40)
	spec.ProjectionHorizon = v1alpha1.Duration{Duration: 3 * time.Minute}
	if !defaultRates {
		spec.Behavior.ScaleUp = &v1alpha1.ScalingRules{Policies: []v1alpha1.ScalingPolicy{
			{Type: v1alpha1.PercentScalingPolicy, Value: 1000, Period: v1alpha1.Duration{Duration: 15 * time.Second}}}}
	}
	return spec
}

// burstPass is one pass 15 s after the last: ready of cur replicas serving 20 requests per
// second at 0.68 of a replica's token work each (3.4 in all, 0.17 per request per second),
// with a learnt capacity of 0.8 (sloShare of it is 0.68: the replicas are at target) sampled
// 30 s ago (nothing is learnt this pass), the queue going from was to now.
func burstPass(spec v1alpha1.AutoscalingSpec, cur, ready int32, was, now float64) Input {
	at := t0.Add(-15 * time.Second)
	prev := &v1alpha1.AutoscalingStatus{
		LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.8", Samples: 10, LastSampleTime: metav1.NewTime(t0.Add(-30 * time.Second))}},
		Recommendations:   []v1alpha1.Recommendation{{At: metav1.NewTime(at.Add(-time.Hour)), Replicas: cur}},
	}
	if was > 0 {
		prev.Queue = &v1alpha1.QueueSample{At: metav1.NewTime(at), Requests: int64(was)}
	}
	in := sloInput(spec, cur, ready, 3.4*float64(ready)/5, 5, now, prev)
	in.Served = ok(20 * float64(ready) / 5)
	return in
}

func sloProposal(t *testing.T, out Output) v1alpha1.Proposal {
	t.Helper()
	for _, p := range out.Status.Proposals {
		if p.Metric == MetricSLO && p.Replicas != nil {
			return p
		}
	}
	t.Fatalf("no slo proposal in %+v", out.Status.Proposals)
	return v1alpha1.Proposal{}
}

// A flash crowd: 5 replicas serve 20 requests/s while the queue grows from 100 to 1,000 in
// 15 s (60/s): 80 requests/s arrive, 4x what is served. The fast path sizes the fleet for them
// in one pass, plus the 1,000 queued drained within the 3-minute cold start (5.6/s):
// ceil(0.17 x (80 + 5.6) / 0.68) = 22, where doubling the Ready replicas gave 10.
func TestABurstOfArrivalsSizesTheFleetForTheArrivalRateInOnePass(t *testing.T) {
	out := Decide(burstPass(burstSpec(false), 5, 5, 100, 1000), t0)
	p := sloProposal(t, out)
	if *p.Replicas != 22 || out.Desired != 22 {
		t.Fatalf("proposal %d, desired %d (%s; held %q), want 22 for 80 requests/s arriving and the queue drained", *p.Replicas, out.Desired, p.Message, out.Held)
	}
	if !strings.Contains(p.Message, "80/s arriving") || out.Event == nil || !strings.Contains(out.Event.Message, "fast path") {
		t.Errorf("message %q, event %+v: want the arrival rate said", p.Message, out.Event)
	}
	if out.Status.Queue == nil || out.Status.Queue.Requests != 1000 || !out.Status.Queue.At.Equal(&metav1.Time{Time: t0}) {
		t.Errorf("status queue %+v, want 1000 at now for the next pass", out.Status.Queue)
	}
	// The default rate limits (HPA's: 100% or 4 pods per 15 s) still hold the step.
	out = Decide(burstPass(burstSpec(true), 5, 5, 100, 1000), t0)
	if out.Desired != 10 || !strings.Contains(out.Held, "rate limited") {
		t.Errorf("desired %d (held %q), want the default rate limit's 10", out.Desired, out.Held)
	}
	// maxReplicas bounds it.
	spec := burstSpec(false)
	spec.MaxReplicas = 15
	if out := Decide(burstPass(spec, 5, 5, 100, 1000), t0); out.Desired != 15 {
		t.Errorf("desired %d, want maxReplicas 15", out.Desired)
	}
}

// A queue that holds (1,000 then 1,000) is no burst: what is served is what arrives, and the
// fast path keeps its doubling of the Ready replicas; so is a queue sample older than the
// serving window (the controller was down), and a queue without the served rate.
func TestASteadyQueueDoesNotSizeForAnArrivalRate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func() Input
	}{
		{name: "a queue that holds", in: func() Input { return burstPass(burstSpec(false), 5, 5, 1000, 1000) }},
		{name: "a queue that shrinks", in: func() Input { return burstPass(burstSpec(false), 5, 5, 1200, 1000) }},
		{name: "a queue that grew by less than a request per Ready replica", in: func() Input { return burstPass(burstSpec(false), 5, 5, 996, 1000) }},
		{name: "no queue at the last pass", in: func() Input { return burstPass(burstSpec(false), 5, 5, 0, 1000) }},
		{name: "a queue sample older than the serving window", in: func() Input {
			in := burstPass(burstSpec(false), 5, 5, 100, 1000)
			in.Previous.Queue.At = metav1.NewTime(t0.Add(-2 * time.Minute))
			return in
		}},
		{name: "no served rate", in: func() Input {
			in := burstPass(burstSpec(false), 5, 5, 100, 1000)
			in.Served = Observation{}
			return in
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Decide(tc.in(), t0)
			p := sloProposal(t, out)
			if *p.Replicas != 10 || strings.Contains(p.Message, "arriving") {
				t.Fatalf("proposal %d (%s), want the doubling's 10", *p.Replicas, p.Message)
			}
		})
	}
	// Without a queue, nothing is kept for the next pass.
	if out := Decide(burstPass(burstSpec(false), 5, 5, 100, 0), t0); out.Status.Queue != nil {
		t.Errorf("status queue %+v without a queue, want none", out.Status.Queue)
	}
}

// The fast path only ever adds: with the queue growing, the count never goes below Current,
// whatever the arrival rate says (pods still starting, a fleet already larger than the
// arrivals need), over random passes.
func TestTheFastPathNeverScalesDown(t *testing.T) {
	// 20 replicas, 10 of them Ready at half their target, a queue growing slowly: the arrival
	// rate asks for 3 (the fast path for at least one more than Ready, 11), the load alone
	// for 3; the count holds at 20.
	in := burstPass(burstSpec(false), 20, 10, 100, 115)
	in.Load = ok(1.7)
	out := Decide(in, t0)
	if p := sloProposal(t, out); !strings.Contains(p.Message, "arriving") || out.Desired != 20 {
		t.Fatalf("desired %d (%s), want 20 held on the fast path", out.Desired, p.Message)
	}
	rng := rand.New(rand.NewPCG(28, 1))
	for i := 0; i < 2000; i++ {
		cur := 1 + rng.Int32N(39)
		ready := 1 + rng.Int32N(cur)
		was := float64(rng.IntN(500))
		now := was + float64(rng.IntN(500))
		in := burstPass(burstSpec(rng.IntN(2) == 0), cur, ready, was, now)
		in.Load = ok(rng.Float64() * 10)
		in.Served = ok(rng.Float64() * 50)
		out := Decide(in, t0)
		if now/float64(ready) >= SLOQueuedPerReplica && out.Desired < cur {
			t.Fatalf("pass %d: %d Ready of %d, queue %g -> %g: desired %d below Current (%s)", i, ready, cur, was, now, out.Desired, sloProposal(t, out).Message)
		}
	}
}

// learnPass is a pass on 20 Ready replicas carrying 0.5 of a replica's token work each, with
// a capacity of 0.8 learnt two minutes ago (this pass learns), the queue going from was to now
// over the last 15 s, and the p95 TTFT given (the ITL well within the SLO).
func learnPass(was, now, ttft float64) Input {
	prev := &v1alpha1.AutoscalingStatus{
		LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.8", Samples: 10, LastSampleTime: metav1.NewTime(t0.Add(-2 * time.Minute))}},
		Queue:             &v1alpha1.QueueSample{At: metav1.NewTime(t0.Add(-15 * time.Second)), Requests: int64(was)},
	}
	return sloInput(burstSpec(false), 20, 20, 10, ttft, now, prev)
}

// A queue that grows is a miss judged on the queue (and the ITL), whatever the p95 TTFT, which
// is then mostly the queue's wait: 100 s or 0.5 s teach the same bound.
func TestAQueuedWindowIsJudgedOnTheQueueNotTheTTFT(t *testing.T) {
	long, _ := sloOf(t, Decide(learnPass(1500, 2000, 100), t0).Status)
	short, _ := sloOf(t, Decide(learnPass(1500, 2000, 0.5), t0).Status)
	if !(long < 0.8) || long != short {
		t.Fatalf("capacity %g with a 100 s TTFT, %g with 0.5 s: want the same bound below 0.8, the queue's", long, short)
	}
}

// A queue that shrinks is a backlog draining (the replicas serve more than arrives): its wait
// teaches nothing, and the capacity stays.
func TestADrainingBacklogTeachesNothing(t *testing.T) {
	if c, _ := sloOf(t, Decide(learnPass(2000, 1500, 100), t0).Status); c != 0.8 {
		t.Fatalf("capacity %g after a draining backlog, want 0.8 kept", c)
	}
}
