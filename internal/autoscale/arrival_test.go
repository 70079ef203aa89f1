package autoscale

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"k8s.io/utils/ptr"
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

// What the slo asks for while a queue is kept in status (the fast path's count, or the load's
// while the backlog's drain adds to the token work read) is the queue's: the scale-down window
// holds it while the queue, its backlog or the windows whose latencies are its wait are there,
// and no longer once status keeps no queue and a window holds the SLO with margin. A flash
// crowd's fleet, asked for on the backlog's work, stayed 5 minutes after its queue was gone
// where the arrivals needed two thirds of it.
func TestTheScaleDownWindowLetsAQueuesCountGoWithTheQueue(t *testing.T) {
	spec := burstSpec(false)
	spec.Behavior.ScaleDown.StabilizationWindow = &v1alpha1.Duration{Duration: 5 * time.Minute}
	out := Decide(burstPass(spec, 5, 5, 100, 1000), t0)
	if out.Desired != 22 {
		t.Fatalf("desired %d on the burst, want the fast path's 22", out.Desired)
	}
	if r := out.Status.Recommendations; len(r) == 0 || !r[len(r)-1].Queued {
		t.Fatalf("recommendations %+v, want the fast path's marked queued", r)
	}
	prev := out.Status
	pass := func(after time.Duration, load float64) Output {
		in := sloInput(spec, 22, 22, load, 0.5, 0, &prev)
		in.Served = ok(40)
		out := Decide(in, t0.Add(after))
		prev = out.Status
		return out
	}
	// A minute later the queue is gone but kept in status (its windows' latencies are the
	// backlog's), and the token work read is still the backlog's drain: 18, more than 22
	// replicas carry at 0.68.
	if got := pass(time.Minute, 18); got.Desired <= 22 || got.Status.Queue == nil {
		t.Fatalf("a minute after the queue: desired %d (queue %+v, held %q), want above 22", got.Desired, got.Status.Queue, got.Held)
	}
	// Four minutes after the queue, none is left in status; but the window is at the SLO's
	// edge (p95 TTFT 1.9 s): the capacity learnt may not be the replicas' (a heavier mix came
	// with the queue), and the scale-down window holds the queue's counts as any.
	// (Here the burst memory is off and a floor of 0.8 a replica was proven before the burst,
	// so that the load alone asks for 12.)
	held := prev
	held.LearnedCapacities = append([]v1alpha1.LearnedCapacity(nil), prev.LearnedCapacities...)
	held.LearnedCapacities[0].Floor = "0.8"
	edgeSpec := spec
	edgeSpec.SLO = &v1alpha1.LatencySLO{TTFTP95: spec.SLO.TTFTP95, ITLP95: spec.SLO.ITLP95, BurstMemory: &v1alpha1.Duration{}}
	in := sloInput(edgeSpec, 22, 22, 6.8, 1.9, 0, &held)
	in.Served = ok(40)
	edge := Decide(in, t0.Add(4*time.Minute))
	if p := sloProposal(t, edge); edge.Status.Queue != nil || *p.Replicas >= 22 || edge.Desired != 22 {
		t.Fatalf("four minutes after the queue at the SLO's edge: proposal %d (%s), desired %d (queue %+v, held %q), want 22 held", *p.Replicas, p.Message, edge.Desired, edge.Status.Queue, edge.Held)
	}
	in = sloInput(edgeSpec, 22, 22, 6.8, 0.5, 0, &held)
	in.Served = ok(40)
	if calm := Decide(in, t0.Add(4*time.Minute)); calm.Desired >= 22 {
		t.Fatalf("four minutes after the queue with margin: desired %d (held %q), want below 22", calm.Desired, calm.Held)
	}
	// With margin (p95 TTFT 0.5 s), the window holds neither: the count is what the load (6.8)
	// and the burst memory ask for.
	got := pass(4*time.Minute, 6.8)
	p := sloProposal(t, got)
	if got.Status.Queue != nil || got.Desired != *p.Replicas || got.Desired >= 22 {
		t.Fatalf("four minutes after the queue: desired %d, proposal %d (%s; held %q), want the proposal, below 22", got.Desired, *p.Replicas, p.Message, got.Held)
	}
	// A count asked for without a queue is held as before.
	calm := v1alpha1.AutoscalingStatus{LearnedCapacities: prev.LearnedCapacities,
		Recommendations: []v1alpha1.Recommendation{{At: metav1.NewTime(t0), Replicas: 22, Metric: MetricSLO}}}
	in = sloInput(spec, 22, 22, 6.8, 0.5, 0, &calm)
	in.Served = ok(40)
	if got := Decide(in, t0.Add(4*time.Minute)); got.Desired != 22 {
		t.Fatalf("desired %d four minutes after 22 asked for without a queue, want it held", got.Desired)
	}
}

// A queue that holds (1,000 then 1,000) is no burst: what is served is what arrives, and the
// fast path keeps its doubling of the Ready replicas; so is a queue that shrinks too slowly to
// be gone within a cold start on a fleet that has all it asked for (new pods take the arrivals
// off the pods it is on), a queue sample older than the serving window (the controller was
// down), and a queue without the served rate.
func TestASteadyQueueDoesNotSizeForAnArrivalRate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func() Input
	}{
		{name: "a queue that holds", in: func() Input { return burstPass(burstSpec(false), 5, 5, 1000, 1000) }},
		{name: "a queue that shrinks by 10 in 15 s (gone in 25 minutes)", in: func() Input { return burstPass(burstSpec(false), 5, 5, 1010, 1000) }},
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
	// Without a queue, the last one seen is kept for two windows (the latencies measured are
	// still the backlog's), then nothing is.
	if out := Decide(burstPass(burstSpec(false), 5, 5, 100, 0), t0); out.Status.Queue == nil || out.Status.Queue.Requests != 100 {
		t.Errorf("status queue %+v 15 s after a queue of 100, want it kept", out.Status.Queue)
	}
	if out := Decide(burstPass(burstSpec(false), 5, 5, 100, 0), t0.Add(2*time.Minute)); out.Status.Queue != nil {
		t.Errorf("status queue %+v two windows after the last queue, want none", out.Status.Queue)
	}
}

// A queue that shrinks is a backlog on the pods it queued on, which new pods cannot take: the
// fast path holds Current instead of doubling the Ready replicas where the pods asked for would
// serve after it is gone (1,200 -> 1,000 in 15 s: gone in 75 s, a cold start is 3 minutes) or
// after the pods starting already (a flash crowd's backlog while the replicas it asked for
// come Ready: doubling then took the fleet to maxReplicas, twice what the crowd needed). Nor
// does it double on a queue last read on fewer Ready replicas: what it did since is not the
// drain on the replicas that serve now (the real bench: 86 queued on 2 Ready, 85 on 6 after
// the 4 asked for came Ready, read as gone in 13 minutes, doubled to 8 then to maxReplicas).
func TestADrainingQueueIsNoBurst(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cur, ready int32
		was, now   float64
		wasReady   int32
		want       int32
	}{
		{name: "gone within a cold start", cur: 5, ready: 5, was: 1200, now: 1000, want: 5},
		{name: "slower, with pods starting", cur: 8, ready: 5, was: 1010, now: 1000, want: 8},
		{name: "slower, on a fleet that has all it asked for", cur: 5, ready: 5, was: 1010, now: 1000, want: 10},
		{name: "slower, read on the Ready replicas of now", cur: 5, ready: 5, was: 1010, now: 1000, wasReady: 5, want: 10},
		{name: "slower, read before new pods came Ready", cur: 6, ready: 6, was: 86, now: 85, wasReady: 2, want: 6},
		{name: "holding, read before new pods came Ready", cur: 6, ready: 6, was: 86, now: 86, wasReady: 2, want: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := burstPass(burstSpec(false), tc.cur, tc.ready, tc.was, tc.now)
			in.Previous.Queue.Ready = tc.wasReady
			out := Decide(in, t0)
			if out.Status.Queue == nil || out.Status.Queue.Ready != tc.ready {
				t.Fatalf("status queue %+v, want it read on %d Ready replicas", out.Status.Queue, tc.ready)
			}
			if p := sloProposal(t, out); *p.Replicas != tc.want || out.Desired != tc.want {
				t.Fatalf("proposal %d (%s), desired %d, want %d", *p.Replicas, p.Message, out.Desired, tc.want)
			}
		})
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

// A burst seen is taken to come again: its arriving load (80 requests/s at 0.17 each, 13.6) is
// kept in status, and after it the fleet is kept at the replicas that carry it at the learnt
// capacity, the load fading by half every 30 minutes (a fleet sized on the minute's average
// between bursts met a 3x spike every 12 minutes with a third of what it needed).
func TestABurstSeenIsRemembered(t *testing.T) {
	spec := burstSpec(false)
	out := Decide(burstPass(spec, 5, 5, 100, 1000), t0)
	var burst v1alpha1.LearnedCapacity
	for _, c := range out.Status.LearnedCapacities {
		if c.Metric == MetricSLO {
			burst = c
		}
	}
	if burst.BurstLoad != "13.6" || burst.BurstTime == nil || !burst.BurstTime.Equal(&metav1.Time{Time: t0}) {
		t.Fatalf("burst %q at %v, want 13.6 at now", burst.BurstLoad, burst.BurstTime)
	}
	prev := out.Status
	for _, tc := range []struct {
		after time.Duration
		load  float64
	}{{time.Minute, 3.4}, {10 * time.Minute, 3.4}, {30 * time.Minute, 3.4}} {
		in := sloInput(spec, out.Desired, out.Desired, tc.load, 0.4, 0, &prev)
		at := t0.Add(tc.after)
		got := Decide(in, at)
		p := sloProposal(t, got)
		c, _ := sloOf(t, got.Status)
		want := int32(math.Ceil(13.6 * math.Exp2(-tc.after.Minutes()/30) / c))
		if *p.Replicas < want || !strings.Contains(p.Message, "burst memory") {
			t.Errorf("%s after the burst: proposal %d (%s), want at least %d for 13.6 faded at capacity %g", tc.after, *p.Replicas, p.Message, want, c)
		}
	}
	// Without a burst, nothing is remembered.
	if out := Decide(burstPass(spec, 5, 5, 1000, 1000), t0); out.Status.LearnedCapacities[0].BurstLoad != "" {
		t.Errorf("burst %q from a queue that held", out.Status.LearnedCapacities[0].BurstLoad)
	}
}

// The burst memory holds no replica while nothing is served: an idle fleet goes to
// minReplicas (0 here) as before.
func TestABurstMemoryHoldsNoIdleFleet(t *testing.T) {
	spec := burstSpec(false)
	spec.MinReplicas = ptr.To(int32(0))
	out := Decide(burstPass(spec, 5, 5, 100, 1000), t0)
	prev := out.Status
	in := sloInput(spec, 5, 5, 0, 0.4, 0, &prev)
	if p := sloProposal(t, Decide(in, t0.Add(10*time.Minute))); *p.Replicas != 0 && strings.Contains(p.Message, "burst memory") {
		t.Fatalf("proposal %d (%s) with nothing served, want none held by the burst", *p.Replicas, p.Message)
	}
}

// A burst whose load is still there a cold start after it was seen is a level the fleet
// follows (a flash crowd: the pods asked for serve it), not a spike that was over before they
// could: it is forgotten. The check is made once, a cold start after the burst: a later spike
// carried by the replicas the memory kept does not make it forget.
func TestABurstThatLastsIsALevelNotASpike(t *testing.T) {
	spec := burstSpec(false) // a cold start of 3 minutes
	out := Decide(burstPass(spec, 5, 5, 100, 1000), t0)
	prev := out.Status
	burstOf := func(st v1alpha1.AutoscalingStatus) string { return st.LearnedCapacities[0].BurstLoad }
	pass := func(at time.Duration, ready int32, load float64) v1alpha1.AutoscalingStatus {
		in := sloInput(spec, ready, ready, load, 0.4, 0, &prev)
		return Decide(in, t0.Add(at)).Status
	}
	if got := burstOf(pass(3*time.Minute, 20, 12)); got != "" {
		t.Errorf("burst %q kept with the load still at 12 a cold start after 13.6 arrived, want it forgotten", got)
	}
	if got := burstOf(pass(3*time.Minute, 5, 3.4)); got != "13.6" {
		t.Errorf("burst %q after a spike that was over a cold start later, want 13.6 kept", got)
	}
	if got := burstOf(pass(10*time.Minute, 20, 12)); got != "13.6" {
		t.Errorf("burst %q at a later spike carried, want 13.6 kept", got)
	}
}

// Two passes 2 s apart (a pass follows any change to the ModelServer or its pods) straddle a
// scrape: the queue read grew by 900, a scrape's growth. It is read over at least a scrape
// interval (a quarter of the 1-minute window: 15 s), as the 15 s passes read it, not as 450
// requests a second arriving, which would size the fleet for 80 and remember it half an hour.
func TestTwoPassesCloseTogetherReadTheQueuesGrowthOverAScrape(t *testing.T) {
	in := burstPass(burstSpec(false), 5, 5, 100, 1000)
	in.Previous.Queue.At = metav1.NewTime(t0.Add(-2 * time.Second))
	out := Decide(in, t0)
	if p := sloProposal(t, out); *p.Replicas != 22 || !strings.Contains(p.Message, "80/s arriving") {
		t.Fatalf("proposal %d (%s), want 22 for 80 requests/s arriving, as with passes 15 s apart", *p.Replicas, p.Message)
	}
	if b := out.Status.LearnedCapacities[0].BurstLoad; b != "13.6" {
		t.Fatalf("burst %q, want 13.6", b)
	}
}

// spec.autoscaling.slo.burstMemory is the memory's half-life: 0s turns it off (nothing kept,
// the proposal the minutes' own), 10m fades it by half in 10 minutes.
func TestTheBurstMemoryIsTheSpecs(t *testing.T) {
	off := burstSpec(false)
	off.SLO.BurstMemory = &v1alpha1.Duration{}
	out := Decide(burstPass(off, 5, 5, 100, 1000), t0)
	if b := out.Status.LearnedCapacities[0].BurstLoad; b != "" {
		t.Fatalf("burst %q remembered with burstMemory 0s", b)
	}
	prev := out.Status
	if p := sloProposal(t, Decide(sloInput(off, 22, 22, 3.4, 0.4, 0, &prev), t0.Add(5*time.Minute))); strings.Contains(p.Message, "burst memory") {
		t.Fatalf("proposal %d (%s) with the memory off", *p.Replicas, p.Message)
	}
	ten := burstSpec(false)
	ten.SLO.BurstMemory = &v1alpha1.Duration{Duration: 10 * time.Minute}
	out = Decide(burstPass(ten, 5, 5, 100, 1000), t0)
	prev = out.Status
	got := Decide(sloInput(ten, 22, 22, 3.4, 0.4, 0, &prev), t0.Add(10*time.Minute))
	p := sloProposal(t, got)
	c, _ := sloOf(t, got.Status)
	if want := int32(math.Ceil(6.8 / c)); *p.Replicas != want || !strings.Contains(p.Message, "fading by half every 10m0s") {
		t.Fatalf("proposal %d (%s) 10 minutes after 13.6 arrived, want %d (6.8 at capacity %g)", *p.Replicas, p.Message, want, c)
	}
}
