package autoscale

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
	"k8s.io/utils/ptr"
)

// sloSpecOf is an SLO-first spec: 2s p95 TTFT, 100ms p95 ITL, no scale-down window.
func sloSpecOf(minR, maxR int32) v1alpha1.AutoscalingSpec {
	return v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(minR)), MaxReplicas: maxR,
		SLO:      &v1alpha1.LatencySLO{TTFTP95: &v1alpha1.Duration{Duration: 2 * time.Second}, ITLP95: &v1alpha1.Duration{Duration: 100 * time.Millisecond}},
		Behavior: v1alpha1.ScalingBehavior{ScaleDown: &v1alpha1.ScalingRules{StabilizationWindow: &v1alpha1.Duration{}}}}
}

// sloInput is one pass: load (token work), the p95 TTFT in seconds, queued requests.
func sloInput(spec v1alpha1.AutoscalingSpec, cur, ready int32, load, ttft, waiting float64, prev *v1alpha1.AutoscalingStatus) Input {
	return Input{Spec: spec, Current: cur, Ready: ready, Starting: cur - ready, Load: ok(load), TTFTP95: ok(ttft), ITLP95: ok(0.04),
		RequestsWaiting: ok(waiting), Previous: prev, ServingWindow: time.Minute}
}

// servedPass is one pass on n Ready replicas of n asked for (minReplicas 1, maxReplicas 40) with
// the load, the p95 TTFT, no queue, and served requests finished per second.
func servedPass(prev *v1alpha1.AutoscalingStatus, n int32, load, ttft, served float64) Output {
	in := sloInput(sloSpecOf(1, 40), n, n, load, ttft, 0, prev)
	in.Served = ok(served)
	return Decide(in, t0)
}

func sloOf(t *testing.T, st v1alpha1.AutoscalingStatus) (capacity, floor float64) {
	t.Helper()
	for _, c := range st.LearnedCapacities {
		if c.Metric == MetricSLO {
			capacity, _ = strconv.ParseFloat(c.PerReplica, 64)
			floor, _ = strconv.ParseFloat(c.Floor, 64)
			return capacity, floor
		}
	}
	t.Fatalf("no slo capacity in %+v", st.LearnedCapacities)
	return 0, 0
}

func TestSLOProposals(t *testing.T) {
	spec := sloSpecOf(1, 20)
	for _, tc := range []struct {
		name                   string
		cur, ready             int32
		load, ttft, waiting    float64
		want                   int32
		wantCapBelow, wantAbov float64
		reason                 string
	}{
		{name: "a first minute that holds the SLO takes the fleet as rightly sized", cur: 4, ready: 4, load: 2, ttft: 0.5, want: 4, wantAbov: 0.58, wantCapBelow: 0.6},
		{name: "a first minute that misses the SLO bounds the capacity and scales up", cur: 4, ready: 4, load: 2, ttft: 3, want: 8, wantAbov: 0.3, wantCapBelow: 0.34, reason: "slo"},
		{name: "queued requests take the fast path at once", cur: 4, ready: 4, load: 2, ttft: 0.5, waiting: 64, want: 8, wantAbov: 0.4, wantCapBelow: 0.5, reason: "fast path"},
		{name: "a few queued requests bound the capacity as a throughput limit", cur: 4, ready: 4, load: 2, ttft: 0.5, waiting: 4, want: 6, wantAbov: 0.4, wantCapBelow: 0.5, reason: "slo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Decide(sloInput(spec, tc.cur, tc.ready, tc.load, tc.ttft, tc.waiting, nil), t0)
			if out.Desired != tc.want {
				t.Fatalf("desired %d, want %d (%+v; held %q)", out.Desired, tc.want, out.Status.Proposals, out.Held)
			}
			c, _ := sloOf(t, out.Status)
			if c <= tc.wantAbov || c >= tc.wantCapBelow {
				t.Errorf("capacity %g, want in (%g, %g)", c, tc.wantAbov, tc.wantCapBelow)
			}
			if tc.reason != "" && (out.Event == nil || !strings.Contains(out.Event.Message, tc.reason)) {
				t.Errorf("event %+v, want it to say %q", out.Event, tc.reason)
			}
		})
	}
}

// With an SLO and no metrics, the slo is the only proposal: no GPU utilization default.
func TestAnSLOWithoutMetricsHasNoGPUDefault(t *testing.T) {
	out := Decide(sloInput(sloSpecOf(1, 20), 4, 4, 2, 0.5, 0, nil), t0)
	if len(out.Status.Proposals) != 1 || out.Status.Proposals[0].Metric != MetricSLO {
		t.Fatalf("proposals %+v, want the slo's only", out.Status.Proposals)
	}
	if !out.MetricsAvailable {
		t.Fatalf("metrics unavailable: %s", out.MetricsMessage)
	}
}

// Missing token work holds the count, as any metric without data does: never read as no load.
func TestAnSLOWithoutLoadDataHolds(t *testing.T) {
	in := sloInput(sloSpecOf(1, 20), 6, 6, 0, 0.5, 0, nil)
	in.Load = Observation{Status: sample.NoData, Message: "no series"}
	out := Decide(in, t0)
	if out.Desired != 6 || out.MetricsAvailable {
		t.Fatalf("desired %d, metrics available %v; want 6 held without data", out.Desired, out.MetricsAvailable)
	}
}

// run drives Decide one minute at a time with the fleet following its decision at once.
type sloRun struct {
	spec v1alpha1.AutoscalingSpec
	prev *v1alpha1.AutoscalingStatus
	cur  int32
	at   time.Time
}

func (r *sloRun) step(load, ttft, waiting float64) Output {
	out := Decide(sloInput(r.spec, r.cur, r.cur, load, ttft, waiting, r.prev), r.at)
	st := out.Status
	r.prev, r.cur, r.at = &st, out.Desired, r.at.Add(time.Minute)
	return out
}

// The SLO held with a wide margin minute after minute: the capacity is probed up, the fleet
// comes down, and each probe stops at sloProbeCeiling times the floor (the load a replica was
// seen to carry holding the SLO), or at one replica fewer where that is further.
func TestAComfortableMarginProbesTheCapacityUp(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}
	r.step(5, 0.4, 0)
	c0, _ := sloOf(t, *r.prev)
	for range 30 {
		ready := r.cur
		r.step(5, 0.4, 0)
		c, floor := sloOf(t, *r.prev)
		limit := sloProbeCeiling * floor
		if ready > 1 {
			limit = max(limit, 5/(sloShare*float64(ready-1)))
		}
		if c > limit*(1+1e-5) {
			t.Fatalf("capacity %g above %g times the floor %g and one replica fewer than %d", c, sloProbeCeiling, floor, ready)
		}
	}
	c, _ := sloOf(t, *r.prev)
	if c <= c0*1.2 || r.cur >= 10 {
		t.Fatalf("after 30 comfortable minutes: capacity %g (from %g), %d replicas; want it probed up and fewer replicas", c, c0, r.cur)
	}
}

// A fleet started above its need (10 replicas carrying 0.1 of a nominal replica's work each,
// the SLO held with a wide margin) is not rightly sized: the first window seeds C at the prior,
// half a nominal replica, and the fleet comes down to what carries the load at it, where a seed
// at the load (0.12) held all 10 and probes of 5-10% a window took hours to bring it down. A
// first window held only just is at the edge, and seeds C at the load as before; so does one
// whose load is above the prior. On a GPU slower than the prior assumes, the next window
// misses, and C comes down with it.
func TestAFleetStartedAboveItsNeedSeedsThePrior(t *testing.T) {
	spec := sloSpecOf(1, 20)
	out := Decide(sloInput(spec, 10, 10, 1.0, 0.3, 0, nil), t0)
	if c, _ := sloOf(t, out.Status); c != sloPrior {
		t.Errorf("capacity %g seeded on 10 replicas carrying 0.1 each with margin, want the prior %g", c, sloPrior)
	}
	if out.Desired != 3 {
		t.Fatalf("desired %d, want the 3 that carry 1.0 at %g of the prior", out.Desired, sloShare)
	}
	tight := Decide(sloInput(spec, 10, 10, 1.0, 1.4, 0, nil), t0)
	if c, _ := sloOf(t, tight.Status); math.Abs(c-0.1/sloShare) > 1e-6 || tight.Desired != 10 {
		t.Errorf("capacity %g, desired %d after a first window held only just, want %g and the 10 held", c, tight.Desired, 0.1/sloShare)
	}
	heavy := Decide(sloInput(spec, 10, 10, 6, 0.3, 0, nil), t0)
	if c, _ := sloOf(t, heavy.Status); math.Abs(c-0.6/sloShare) > 1e-6 || heavy.Desired != 10 {
		t.Errorf("capacity %g, desired %d after a first window carrying 0.6 a replica with margin, want %g and the 10 held", c, heavy.Desired, 0.6/sloShare)
	}
	// The 3 replicas miss (a slower GPU): C comes down, the fleet grows.
	st := out.Status
	missed := Decide(sloInput(spec, 3, 3, 1.0, 3, 0, &st), t0.Add(5*time.Minute))
	if c, _ := sloOf(t, missed.Status); c >= sloPrior || missed.Desired <= 3 {
		t.Errorf("capacity %g, desired %d after 3 replicas missed the SLO at the prior, want it below %g and more replicas", c, missed.Desired, sloPrior)
	}
}

// One odd minute (a burst inside it) misses the SLO at a load replicas have carried for an
// hour: the capacity comes down no further than the floor, so the fleet grows by a little, not
// by the miss's ratio, and the probing takes it back.
func TestOneOddMinuteCannotRatchetTheCapacity(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(6, 40), cur: 10, at: t0}
	for range 60 {
		r.step(5, 1.0, 0)
	}
	before, floor := sloOf(t, *r.prev)
	n := r.cur
	r.step(5, 8, 0) // a 4x miss: halfway to a quarter would halve the capacity
	after, _ := sloOf(t, *r.prev)
	floor *= math.Exp2(-time.Minute.Seconds() / sloFloorHalfLife.Seconds()) // a minute's decay
	if after < floor*(1-1e-9) || after >= before {
		t.Fatalf("after the odd minute: capacity %g (before %g, floor %g), want lowered to no less than the floor", after, before, floor)
	}
	if r.cur > n+n/2 {
		t.Fatalf("%d replicas after one odd minute from %d", r.cur, n)
	}
}

// The floor decays: an hour after a replica last carried a load, it proves half as much.
func TestTheFloorDecays(t *testing.T) {
	st := sloState{capacity: 1, floor: 0.8, last: t0, known: true}
	if f := st.floorAt(t0.Add(sloFloorHalfLife)); math.Abs(f-0.4) > 1e-9 {
		t.Fatalf("floor after a half-life %g, want 0.4", f)
	}
}

// A new revision starts from the capacity of the one before, without its floor or samples.
func TestANewRevisionStartsFromThePreviousCapacity(t *testing.T) {
	prev := []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.7", Floor: "0.6", Samples: 40, Revision: "r1"}}
	st := sloStateOf(prev, "r2")
	if !st.known || st.capacity != 0.7 || st.floor != 0 || st.samples != 0 || st.revision != "r2" {
		t.Fatalf("state %+v, want capacity 0.7 without floor nor samples on r2", st)
	}
	if st := sloStateOf(prev, "r1"); st.floor != 0.6 || st.samples != 40 {
		t.Fatalf("same revision: %+v, want it kept", st)
	}
}

// The status survives a restart: Decide reads everything it learnt from status, so a fresh
// run continuing from the same status decides as the one that never stopped.
func TestTheLearntCapacitySurvivesARestart(t *testing.T) {
	a := &sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}
	for range 20 {
		a.step(5, 0.4, 0)
	}
	st := *a.prev.DeepCopy()
	b := &sloRun{spec: a.spec, cur: a.cur, at: a.at, prev: &st}
	for i := range 10 {
		x, y := a.step(6, 0.5+0.2*float64(i%3), 0), b.step(6, 0.5+0.2*float64(i%3), 0)
		if x.Desired != y.Desired {
			t.Fatalf("minute %d: %d vs %d after a restart", i, x.Desired, y.Desired)
		}
	}
}

// Sequence: seeded random loads with a latency that follows the load per replica against a
// hidden capacity (TTFT rising steeply past it), bursts of queued requests, missing data.
// After every step: the count is within bounds, the capacity is positive and finite, at least
// the floor; a queue never brings the count down; a minute that missed never raises the
// capacity.
func TestSLOSequences(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 28))
		hidden := 0.3 + rng.Float64()
		spec := sloSpecOf(1, 60)
		r := &sloRun{spec: spec, cur: int32(1 + rng.IntN(20)), at: t0}
		base := 1 + rng.Float64()*10
		lastCap := -1.0
		for i := range 120 {
			load := base * (0.7 + 0.6*rng.Float64())
			u := load / float64(r.cur)
			ttft := 0.3 + 4*math.Max(0, u/hidden-0.8)
			waiting := 0.0
			if u > hidden {
				waiting = float64(r.cur) * (u/hidden - 1) * 20
			}
			before := r.cur
			in := sloInput(spec, r.cur, r.cur, load, ttft, waiting, r.prev)
			if rng.IntN(20) == 0 {
				in.Load = Observation{Status: sample.NoData}
			}
			out := Decide(in, r.at)
			st := out.Status
			r.prev, r.cur, r.at = &st, out.Desired, r.at.Add(time.Minute)
			if r.cur < spec.Min() || r.cur > spec.MaxReplicas {
				t.Fatalf("seed %d step %d: %d replicas outside [1, 60]", seed, i, r.cur)
			}
			if waiting/float64(before) >= SLOQueuedPerReplica && in.Load.Status == sample.OK && r.cur < before {
				t.Fatalf("seed %d step %d: %d -> %d replicas while %g requests queue", seed, i, before, r.cur, waiting)
			}
			if lastCap < 0 && len(st.LearnedCapacities) == 0 {
				continue // nothing learnt yet: no data, or a draining queue (no lesson)
			}
			c, floor := sloOf(t, st)
			if !(c > 0) || math.IsInf(c, 0) || c < floor*(1-1e-9) {
				t.Fatalf("seed %d step %d: capacity %g, floor %g", seed, i, c, floor)
			}
			if lastCap > 0 && (ttft > 2 || waiting >= float64(before)) && in.Load.Status == sample.OK && c > lastCap*(1+1e-9) {
				t.Fatalf("seed %d step %d: a missed minute raised the capacity %g -> %g", seed, i, lastCap, c)
			}
			lastCap = c
		}
	}
}

// A probe that stepped off the cliff (the queue builds at 6 replicas while 7 held easily): the
// miss sets the ceiling at the load per replica it missed at, and probing does not take the
// capacity above it (risen by 12% in ten minutes: it doubles every hour, then probing may
// take the fleet there again).
func TestProbingStopsAtTheCeilingOfTheLastMiss(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(1, 20), cur: 6, at: t0}
	r.step(6, 0.4, 0)
	r.step(6, 0.4, 12) // 2 queued per replica at 1 per replica: a miss
	var ceiling float64
	for _, c := range r.prev.LearnedCapacities {
		ceiling, _ = strconv.ParseFloat(c.Ceiling, 64)
	}
	if ceiling != 1 {
		t.Fatalf("ceiling %g, want 1 (6 of token work on 6 replicas missed)", ceiling)
	}
	for range 10 {
		r.step(6, 0.3, 0)
		c, _ := sloOf(t, *r.prev)
		if c > 1*math.Exp2(10.0/60)+1e-9 {
			t.Fatalf("capacity %g probed above the ceiling", c)
		}
	}
	if r.cur < 7 {
		t.Fatalf("%d replicas: probing took the fleet back to where it missed", r.cur)
	}
}

// Held, but tightly (a p95 above 0.6 of its SLO): the replicas are at the edge and the
// capacity comes back to what held (the window's load per replica at the share the fleet is
// sized at, or the floor when more was proven with margin) instead of being probed further.
func TestATightMarginStopsProbing(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}
	for range 10 {
		r.step(5, 0.4, 0)
	}
	before, _ := sloOf(t, *r.prev)
	u := 5 / float64(r.cur)
	r.step(5, 1.5, 0)
	after, floor := sloOf(t, *r.prev)
	if after >= before || math.Abs(after-max(floor, u/sloShare)) > 1e-6 {
		t.Fatalf("capacity %g -> %g (floor %g, held %g), want it back to what held", before, after, floor, u)
	}
}

// Passes every 15s with a 30s scale-down window: each probe lowers the proposal, and the
// scale-down comes 30s later, between two of the slo's once-a-minute samples. The scale event
// stays in status long enough for the next sample to see it (not only the rate limits' 15s),
// so no probe is taken on a window measured on more replicas than serve now: the capacity
// never rises within a window after a scale-down.
func TestNoProbeOnAWindowMeasuredBeforeAScaleDown(t *testing.T) {
	spec := sloSpecOf(1, 20)
	spec.Behavior.ScaleDown.StabilizationWindow = &v1alpha1.Duration{Duration: 30 * time.Second}
	var prev *v1alpha1.AutoscalingStatus
	cur, at := int32(10), t0
	lastCap, lastDown := 0.0, time.Time{}
	probes, downs := 0, 0
	for range 4 * 40 {
		out := Decide(sloInput(spec, cur, cur, 5, 0.4, 0, prev), at)
		st := out.Status
		prev = &st
		if c, _ := sloOf(t, st); lastCap > 0 && c > lastCap*(1+1e-9) {
			probes++
			if !lastDown.IsZero() && at.Sub(lastDown) < time.Minute {
				t.Fatalf("at %s the capacity was probed %g -> %g on a window with a scale-down %s before", at.Sub(t0), lastCap, c, at.Sub(lastDown))
			}
			lastCap = c
		} else if lastCap == 0 || c < lastCap {
			lastCap = c
		}
		if out.Desired < cur {
			downs++
			lastDown = at
		}
		cur, at = out.Desired, at.Add(15*time.Second)
	}
	if probes == 0 || downs == 0 {
		t.Fatalf("%d probes, %d scale-downs in 40 comfortable minutes: the sequence shows nothing", probes, downs)
	}
}

// Six replicas fall behind (a queue): the ceiling is set near their load, and the fast path
// doubles the fleet. Three minutes later (the cold start, projectionHorizon) the new pods are
// Ready, while the latency window still shows the backlog the six could not serve. That miss
// was measured on six replicas, not twelve: it must not set a ceiling at half the load per
// replica, which would stop the probing for an hour.
func TestAMissMeasuredBeforeTheNewPodsServedSetsNoCeiling(t *testing.T) {
	spec := sloSpecOf(1, 20)
	spec.ProjectionHorizon = v1alpha1.Duration{Duration: 3 * time.Minute}
	var prev *v1alpha1.AutoscalingStatus
	at := t0
	pass := func(cur, ready int32, load, ttft, waiting float64) Output {
		out := Decide(sloInput(spec, cur, ready, load, ttft, waiting, prev), at)
		st := out.Status
		prev, at = &st, at.Add(time.Minute)
		return out
	}
	for range 3 {
		pass(6, 6, 5.4, 0.5, 0)
	}
	out := pass(6, 6, 6, 1.5, 60) // 10 queued per replica at 1 each: beyond capacity
	if out.Desired != 12 {
		t.Fatalf("desired %d, want the fast path to 12", out.Desired)
	}
	ceilingOf := func() float64 {
		for _, c := range prev.LearnedCapacities {
			if c.Metric == MetricSLO {
				v, _ := strconv.ParseFloat(c.Ceiling, 64)
				return v
			}
		}
		return 0
	}
	if c := ceilingOf(); c < 0.99 || c > 1.01 {
		t.Fatalf("ceiling %g after the miss at 1 per replica, want 1", c)
	}
	pass(12, 6, 6, 3, 80)
	pass(12, 6, 6, 3.5, 40)
	pass(12, 12, 6, 3.5, 0) // the new pods serve; the window is the backlog's
	if c := ceilingOf(); c < 0.9 {
		t.Fatalf("ceiling %g after the new pods came Ready under the old window, want about 1 (not 6/12)", c)
	}
}

// Held tightly in the window right after a scale-down: the window was measured on more
// replicas than serve now, so the edge is nearer still, and the capacity comes back to what
// held (a scale-down blocks the probe, not the retreat).
func TestATightMarginAfterAScaleDownStillStopsProbing(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}
	for range 10 {
		r.step(5, 0.4, 0)
	}
	before, _ := sloOf(t, *r.prev)
	u := 5 / float64(r.cur)
	r.prev.Events = append(r.prev.Events, v1alpha1.ScaleEvent{At: metav1.NewTime(r.at.Add(-30 * time.Second)), From: r.cur + 1, To: r.cur})
	r.step(5, 1.5, 0)
	after, floor := sloOf(t, *r.prev)
	if after >= before || math.Abs(after-max(floor, u/sloShare)) > 1e-6 {
		t.Fatalf("capacity %g -> %g (floor %g, held %g), want it back to what held", before, after, floor, u)
	}
}

// Tight windows at the load the fleet is sized for keep it: C comes back to what the replicas
// held at the share they are sized at, not below. At C itself each tight window asked for more
// replicas, whose lower load the next tight window took as C again: on a long-prompt workload
// (a p95 TTFT most of the SLO at any load) C halved in 30 minutes while the latency stood still.
func TestTightWindowsDoNotRatchetTheFleetUp(t *testing.T) {
	st := v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.6",
		Samples: 10, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
	r := &sloRun{spec: sloSpecOf(1, 40), prev: &st, cur: 10, at: t0}
	first := r.step(4.7, 1.5, 0).Desired
	for range 10 {
		r.step(4.7, 1.5, 0) // the same load, the same tight p95 TTFT (0.75 of the SLO)
	}
	if r.cur > first {
		c, _ := sloOf(t, *r.prev)
		t.Fatalf("%d replicas after ten tight windows at the same load (C %g), %d after the first: want no more", r.cur, c, first)
	}
}

// A cliff no latency shows before it is crossed (as the simulator's replicas have it: p95 ITL
// at 0.46 of its SLO up to the load where requests queue, then a queue): the replicas carry 1.0
// each, the load is 6.2. The fleet probes down from 12 to 7 (0.89 each); never seen beyond
// capacity, it may try 6 (one replica fewer), which queues. The ceiling that miss sets holds
// every later probe within 1.15x of what held with margin (sloShare x sloProbeCeiling): over two
// hours the fleet steps off the cliff once, and stays at 7.
func TestProbingStepsOffACliffItCannotSeeOnlyOnce(t *testing.T) {
	spec := sloSpecOf(1, 20)
	r := &sloRun{spec: spec, cur: 12, at: t0}
	crossings, beyond := 0, false
	for range 120 {
		u := 6.2 / float64(r.cur)
		ttft, waiting := 0.9, 0.0
		if u > 1 {
			ttft, waiting = 3, 20*float64(r.cur)
			if !beyond {
				crossings++
			}
		}
		beyond = u > 1
		in := sloInput(spec, r.cur, r.cur, 6.2, ttft, waiting, r.prev)
		in.ITLP95 = ok(0.046)
		out := Decide(in, r.at)
		st := out.Status
		r.prev, r.cur, r.at = &st, out.Desired, r.at.Add(time.Minute)
	}
	if crossings > 1 || r.cur != 7 {
		t.Fatalf("stepped off the cliff %d times in two hours, %d replicas at the end; want at most once, and 7", crossings, r.cur)
	}
}

// A window that holds the SLO only just (p95 TTFT at 0.95 of it) at a load per replica well
// above what was seen with margin proves nothing for the next window (on bursty traffic it is
// the burst that happened to miss it): the floor stays where the margin put it, and a miss at
// that load then lowers the capacity below it.
func TestAWindowHeldOnlyJustRaisesNoFloor(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(10, 10), cur: 10, at: t0}
	for range 5 {
		r.step(5, 0.4, 0)
	}
	_, floor := sloOf(t, *r.prev)
	r.step(8, 1.9, 0)
	if _, f := sloOf(t, *r.prev); f > floor*1.001 {
		t.Fatalf("floor %g -> %g after a window that held only just at 0.8 per replica", floor, f)
	}
	r.step(8, 3, 0)
	if c, _ := sloOf(t, *r.prev); c >= 0.8 {
		t.Fatalf("capacity %g after a miss at 0.8 per replica, want it below", c)
	}
}

// Pods are starting (8 asked for, 6 Ready): a window in which the Ready ones held the SLO with
// margin teaches, but some of the 8 may have come Ready within it, so what each replica carried
// is taken as 4.2 over 8, a bound below it: the floor rises to 0.525. The first window of a new
// fleet (1 of 4 pods Ready yet) so seeds no capacity of 2 per replica, which would scale to 1.
func TestAWindowWithPodsStartingProvesWhatTheReplicasCarried(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(1, 20), cur: 6, at: t0}
	r.step(3, 0.4, 0)
	_, floor := sloOf(t, *r.prev)
	out := Decide(sloInput(r.spec, 8, 6, 4.2, 0.5, 0, r.prev), r.at)
	if _, f := sloOf(t, out.Status); math.Abs(f-0.525) > 1e-6 || f <= floor {
		t.Fatalf("floor %g -> %g, want 0.525 (4.2 on the 8 replicas asked for)", floor, f)
	}
	out = Decide(sloInput(r.spec, 4, 1, 2, 0.4, 0, nil), t0)
	if c, _ := sloOf(t, out.Status); out.Desired < 4 || c > 0.6 {
		t.Fatalf("first window with 1 of 4 Ready: capacity %g, desired %d; want about 0.5/0.85 and 4 held", c, out.Desired)
	}
}

// Along a rising trend (the projection horizon is the cold start) the slo does not scale down
// below the replicas the projected load needs: removed now, they would be asked back within a
// cold start. A trend whose projection stays within the tolerance of Current adds nothing.
func TestTheProjectionHoldsAScaleDownAndRespectsTheTolerance(t *testing.T) {
	spec := sloSpecOf(1, 40)
	spec.ProjectionHorizon = v1alpha1.Duration{Duration: 3 * time.Minute}
	st := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "1", Floor: "0.5",
		Samples: 10, LastSampleTime: metav1.NewTime(t0.Add(-30 * time.Second))}}}
	rising := func(cur int32, load, trend float64) Output {
		in := sloInput(spec, cur, cur, load, 0.4, 0, st)
		in.Load.Trend, in.Load.HasTrend = trend, true
		return Decide(in, t0)
	}
	// 6.8 now is 8 replicas at 0.85; 8.0 in three minutes is 10: hold 10, not 8.
	if out := rising(10, 6.8, 1.2/180); out.Desired != 10 {
		t.Fatalf("desired %d along a rising trend, want 10 held (%+v)", out.Desired, out.Status.Proposals)
	}
	// 8.4 now is Current's 10 within the tolerance; 8.58 in three minutes is 11 replicas at
	// 0.85, but within the tolerance of 10: no replica for it.
	if out := rising(10, 8.4, 0.001); out.Desired != 10 {
		t.Fatalf("desired %d on a trend within the tolerance, want 10 (%+v)", out.Desired, out.Status.Proposals)
	}
	// Well beyond the tolerance, the projection raises the count as before.
	if out := rising(10, 8.4, 0.02); out.Desired != 15 {
		t.Fatalf("desired %d, want 15 for 12 projected (%+v)", out.Desired, out.Status.Proposals)
	}
}

// lightSeed is the status after a first window on 2 Ready replicas at a light load (token work
// load, p95 TTFT ttft), which must seed a capacity of at most most. The window holds the SLO
// only just (the requests' own latency: long prompts' prefills), so that it seeds C at the load
// (the fleet taken as rightly sized); one held with margin seeds at least sloPrior. (Before the
// prior, such seeds came from windows with margin too: a smoke test's requests, a trace's
// first minutes.)
func lightSeed(t *testing.T, spec v1alpha1.AutoscalingSpec, load, ttft, most float64) v1alpha1.AutoscalingStatus {
	t.Helper()
	if ttft <= sloMargin*2 {
		t.Fatalf("p95 TTFT %gs of the SLO's 2s: a light seed needs a first window held only just (with margin it seeds at least the prior)", ttft)
	}
	first := Decide(sloInput(spec, 2, 2, load, ttft, 0, nil), t0)
	if c, _ := sloOf(t, first.Status); c > most {
		t.Fatalf("seed capacity %g: the test needs one seeded at the light load (at most %g)", c, most)
	}
	return first.Status
}

// A capacity seeded at a light load (the first window of a trace that starts, half of it
// before the trace) is not stretched to a load many times larger: the next pass, within the
// same window, holds the SLO with margin at that load, which proves that a replica carries it,
// so the fleet grows by the load the SLO says it cannot carry, not by the load's ratio (the
// bench's modelship-slo contender went from 2 to 6, then to its maxReplicas of 10, on a
// capacity of 0.004 seeded this way, its SLO held in every minute at twice KEDA + HPA's GPUs).
func TestACapacitySeededAtALightLoadIsNotStretchedToAHeavyOne(t *testing.T) {
	spec := sloSpecOf(2, 10)
	st := lightSeed(t, spec, 0.008, 1.4, 0.01)
	out := Decide(sloInput(spec, 2, 2, 0.652, 0.4, 0, &st), t0.Add(20*time.Second))
	if out.Desired > 3 {
		t.Fatalf("desired %d on a load of 0.652 that 2 replicas hold with margin (p95 TTFT 0.4s of 2s); want at most 3 (%+v)", out.Desired, out.Status.Proposals)
	}
	c, floor := sloOf(t, out.Status)
	if c < 0.326 {
		t.Errorf("capacity %g: want at least the 0.326 a replica was seen to carry", c)
	}
	if floor > 0.01 {
		t.Errorf("floor %g: the floor is the window's sample's, not raised within the window", floor)
	}
	// A tight window within the same window, at a load within sloReseed of it, proves nothing
	// more: the capacity stays.
	tight := out.Status
	again := Decide(sloInput(spec, out.Desired, out.Desired, 1.2, 1.5, 0, &tight), t0.Add(30*time.Second))
	if c2, _ := sloOf(t, again.Status); c2 != c {
		t.Errorf("capacity %g after a tight pass within the window, want %g unchanged", c2, c)
	}
}

// A seed taken at a light load (a smoke test's requests before the traffic: 0.002 of a
// replica's work on 2 replicas, held only just) is the fleet taken as rightly sized there; the
// traffic's first pass, 400 times the load and queued, sized at it asked for 1,784 replicas on
// the real bench.
// Before any miss, C is a bound below, and a load per replica beyond twice it that misses seeds
// it again, as the first window would (a queued one: the queue's bound); one that holds, even
// only just, lifts C to what each replica carries; once a miss was seen, C is not seeded again.
func TestACapacityBelowTheTrafficIsSeededAgain(t *testing.T) {
	spec := sloSpecOf(2, 10)
	st := lightSeed(t, spec, 0.002, 1.4, 0.002)
	out := Decide(sloInput(spec, 2, 2, 0.83, 0.5, 4, &st), t0.Add(20*time.Second))
	p := sloProposal(t, out)
	if *p.Replicas > 4 {
		t.Fatalf("proposal %d (%s) for 0.83 queued on 2 replicas after a seed at 0.002, want at most 4", *p.Replicas, p.Message)
	}
	if c, _ := sloOf(t, out.Status); math.Abs(c-0.9*0.83/2) > 1e-6 {
		t.Errorf("capacity %g, want the queued pass's bound %g", c, 0.9*0.83/2)
	}
	probed := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.1",
		Samples: 50, LastSampleTime: metav1.NewTime(t0.Add(-20 * time.Second))}}}
	if c, _ := sloOf(t, Decide(sloInput(spec, 2, 2, 0.83, 0.5, 4, probed), t0).Status); math.Abs(c-0.9*0.83/2) > 1e-6 {
		t.Errorf("capacity %g after a queued pass at 4 times one probed over 50 windows without a miss, want it seeded again, %g", c, 0.9*0.83/2)
	}
	tight := Decide(sloInput(spec, 2, 2, 0.83, 1.5, 0, probed), t0)
	if c, _ := sloOf(t, tight.Status); math.Abs(c-0.83/2) > 1e-6 || *sloProposal(t, tight).Replicas > 3 {
		t.Errorf("capacity %g, proposal %d after a tight pass at 4 times one probed without a miss, want %g, at most 3", c, *sloProposal(t, tight).Replicas, 0.83/2)
	}
	missed := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.1", Ceiling: "0.15",
		Samples: 50, LastSampleTime: metav1.NewTime(t0.Add(-20 * time.Second))}}}
	if c, _ := sloOf(t, Decide(sloInput(spec, 2, 2, 0.83, 0.5, 4, missed), t0).Status); c != 0.1 {
		t.Errorf("capacity %g after a queued pass, within the window, of one that has seen a miss, want 0.1 kept", c)
	}
}

// A capacity seeded at a light load on minReplicas (0.04 of a replica's work on 2 replicas,
// held only just) meets the traffic's first rise with pods already asked for: 0.124 on the 2
// Ready replicas of 4. They hold it with margin, which proves each Ready replica carries 0.062;
// the 2 still starting served none of it. Taken over the 4 asked for, C stayed at 0.031 and
// the rise asked for 5 replicas where 2 held it (a held-out low-rate workload: 13 replicas for
// a load the optimum served on 2 throughout).
func TestARiseHeldByTheReadyReplicasLiftsALightSeed(t *testing.T) {
	spec := sloSpecOf(2, 20)
	st := lightSeed(t, spec, 0.04, 1.4, 0.03)
	out := Decide(sloInput(spec, 4, 2, 0.124, 0.08, 0, &st), t0.Add(15*time.Second))
	if c, _ := sloOf(t, out.Status); c < 0.062-1e-9 {
		t.Errorf("capacity %g after 2 Ready replicas held 0.124 with margin, want at least 0.062", c)
	}
	if p := sloProposal(t, out); *p.Replicas > 3 {
		t.Errorf("proposal %d (%s) for 0.124 that 2 Ready replicas hold at a p95 TTFT of 0.08 s, want at most 3", *p.Replicas, p.Message)
	}
}

// A rate over a window the traffic has not filled reads its start: 15 s into a steady load
// Prometheus reads a quarter of it. Seeded there, the capacity is a quarter of a replica's, and
// the window filling asks for four times the replicas (the real bench: seeded at 0.325 where
// replicas carry 0.55, then 6 replicas asked for 3). Nothing is learnt until the window is full;
// the fleet holds meanwhile (the fast path still answers a queue), and the first full window
// seeds the capacity.
func TestNothingIsLearntFromAWindowTheTrafficHasNotFilled(t *testing.T) {
	spec := sloSpecOf(2, 10)
	filling := sloInput(spec, 3, 3, 0.3, 0.4, 0, nil)
	filling.Load.Filling = true
	out := Decide(filling, t0)
	for _, c := range out.Status.LearnedCapacities {
		if c.Metric == MetricSLO {
			t.Fatalf("capacity %s seeded from a window still filling, want none", c.PerReplica)
		}
	}
	if p := sloProposal(t, out); *p.Replicas != 3 || !strings.Contains(p.Message, "filling") {
		t.Fatalf("proposal %d (%s) without a capacity, want 3 held, saying the window is filling", *p.Replicas, p.Message)
	}
	st := out.Status
	full := Decide(sloInput(spec, 3, 3, 1.5, 0.4, 0, &st), t0.Add(45*time.Second))
	if c, _ := sloOf(t, full.Status); math.Abs(c-1.5/3/sloShare) > 1e-6 {
		t.Fatalf("capacity %g from the first full window, want %g", c, 1.5/3/sloShare)
	}
	if p := sloProposal(t, full); *p.Replicas != 3 {
		t.Errorf("proposal %d on the first full window, want the 3 that carry it", *p.Replicas)
	}
	// A capacity known is kept through a window filling again (traffic back after a pause).
	known := full.Status
	again := sloInput(spec, 3, 3, 0.05, 3, 4, &known)
	again.Load.Filling = true
	if c, _ := sloOf(t, Decide(again, t0.Add(5*time.Minute)).Status); math.Abs(c-1.5/3/sloShare) > 1e-6 {
		t.Errorf("capacity %g after a queued pass in a window filling, want %g kept", c, 1.5/3/sloShare)
	}
}

// Traffic that comes back after an idle spell fills its rate's window again: 15 s in, the
// token work reads a part of its level. A scale-down is not taken on such a read (a fleet idle
// for its scale-down window was cut from 9 replicas to 5 in the 30 s its traffic came back, on a
// held-out on/off workload, and missed 5 minutes); what the proposal asked is still recorded,
// so that trickling traffic, whose window fills now and then, does not pin the fleet; an idle
// fleet (nothing served) and a full window scale down as before.
func TestNoScaleDownWhileTheTrafficFillsItsWindow(t *testing.T) {
	spec := sloSpecOf(1, 20)
	known := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "1", Floor: "0.8",
		Samples: 20, LastSampleTime: metav1.NewTime(t0.Add(-10 * time.Minute))}}}
	back := sloInput(spec, 9, 9, 0.6, 0.5, 0, known)
	back.Load.Filling = true
	out := Decide(back, t0)
	if out.Desired != 9 || !strings.Contains(out.Held, "window fills") {
		t.Fatalf("desired %d (held %q) on a window the traffic fills, want 9 held", out.Desired, out.Held)
	}
	p := sloProposal(t, out)
	if *p.Replicas >= 9 {
		t.Fatalf("proposal %d, want the read's (fewer than 9)", *p.Replicas)
	}
	if recs := out.Status.Recommendations; len(recs) == 0 || recs[len(recs)-1].Replicas != *p.Replicas {
		t.Errorf("recommendations %+v, want the proposal's %d recorded last, not Current", recs, *p.Replicas)
	}
	full := sloInput(spec, 9, 9, 0.6, 0.5, 0, known)
	if d := Decide(full, t0).Desired; d >= 9 {
		t.Errorf("desired %d on the same read over a full window, want a scale-down", d)
	}
	idle := sloInput(spec, 9, 9, 0, 0.5, 0, known)
	idle.Load.Filling = true
	if d := Decide(idle, t0).Desired; d >= 9 {
		t.Errorf("desired %d with nothing served, want a scale-down", d)
	}
	up := sloInput(spec, 2, 2, 3, 0.5, 0, known)
	up.Load.Filling = true
	if d := Decide(up, t0).Desired; d <= 2 {
		t.Errorf("desired %d on a filling read that asks for more, want a scale-up", d)
	}
}

// A window that held only just while new pods were coming up brings the capacity back to what
// each serving replica carried, the load over the Ready replicas: not over Current, whose pods
// still loading carried nothing. Over Current, every such window took the capacity below what
// the replicas carried and asked for more pods again, each request for pods lowering the next
// window's load per replica asked for: a held-out long-prompt workload went to maxReplicas
// that way (2.0x the optimum's GPU-hours).
func TestATightWindowWithPodsStartingComesBackToWhatTheReadyOnesCarried(t *testing.T) {
	st := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.19",
		Samples: 6, Revision: "", LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
	out := Decide(sloInput(sloSpecOf(1, 40), 25, 18, 2.6, 1.74, 0, st), t0)
	c, _ := sloOf(t, out.Status)
	if want := 2.6 / 18 / sloShare; math.Abs(c-want) > 1e-6 {
		t.Fatalf("capacity %g after a tight window on 18 Ready of 25, want %g (2.6 over the Ready replicas)", c, want)
	}
}

// Where the latencies stay high at any load (a long prompt's own prefill), a tight window at a
// light load, each replica carrying at most 0.7 of the load of the last miss, says
// nothing of the capacity: it is left where it is, where before it was brought down to the
// load per replica at each such window, the fleet growing to maxReplicas. Such windows' lowest
// latency is the floor over which the margin is then read: 0.7 of the SLO is tight over no
// floor and a margin over a floor of 0.5, which raises the capacity.
func TestLatenciesHighAtALightLoadAreTheRequestsNotTheLoad(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(1, 40), cur: 9, at: t0}
	r.step(2.25, 2.44, 0) // a miss at 0.25 a replica: the last miss's load
	r.prev.Events = nil   // as if the pods asked for had come long ago
	c0, _ := sloOf(t, *r.prev)
	r.cur = 30
	out := r.step(2.7, 1.4, 0) // 0.09 a replica: light; tight over no floor
	c1, _ := sloOf(t, out.Status)
	if math.Abs(c1-c0) > 1e-9 {
		t.Fatalf("capacity %g -> %g on a tight window at a light load, want it kept", c0, c1)
	}
	if lf := out.Status.LearnedCapacities[0].LatencyFloor; lf != "0.7" {
		t.Fatalf("latency floor %q, want 0.7 (1.4s of the 2s SLO at a light load)", lf)
	}
	r.cur = 30
	r.step(2.7, 1.0, 0) // lower: the floor is 0.5
	r.cur = 12
	out = r.step(2.7, 1.4, 0) // 0.225 a replica: not light; 0.7 of the SLO is within the margin over the floor
	c2, _ := sloOf(t, out.Status)
	if lf := out.Status.LearnedCapacities[0].LatencyFloor; lf != "0.5" {
		t.Fatalf("latency floor %q, want 0.5", lf)
	}
	if !(c2 > c1) {
		t.Fatalf("capacity %g -> %g on a window at 0.7 of the SLO over a floor of 0.5: want it raised (a margin)", c1, c2)
	}
	// Without the floor (a new revision), the same window is tight.
	learnt := append([]v1alpha1.LearnedCapacity(nil), out.Status.LearnedCapacities...)
	learnt[0].Revision = "r1"
	st := sloStateOf(learnt, "r2")
	if st.latFloor != 0 || st.overFloor(0.7) != 0.7 {
		t.Fatalf("a new revision kept the latency floor: %+v", st)
	}
}

// overFloor reads the margin over the floor as sloMargin and the SLO as 1, and changes nothing
// where the floor is at most a fifth of the SLO.
func TestOverFloorMapsTheMarginOverTheFloor(t *testing.T) {
	for _, tc := range []struct{ floor, lat, want float64 }{
		{0, 0.7, 0.7}, {0.2, 0.7, 0.7}, {0.1, 0.5, 0.5},
		{0.5, 0.75, sloMargin}, {0.5, 1, 1}, {0.5, 1.3, 1.3}, {0.5, 0.375, sloMargin / 2},
		{0.6, 0.8, sloMargin}, {0.6, 0.9, sloMargin + (0.9-0.8)*(1-sloMargin)/(1-0.8)},
	} {
		got := sloState{latFloor: tc.floor}.overFloor(tc.lat)
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("floor %g: overFloor(%g) = %g, want %g", tc.floor, tc.lat, got, tc.want)
		}
	}
}

// A light load is light against the last miss's load per replica, which does not age: two
// hours after a miss at 0.5 a replica (the ceiling has doubled twice since), a tight window at
// 0.4 is at the edge, and the capacity comes back to it (at the share the fleet is sized at).
func TestALightLoadIsLightAgainstTheLastMissNotTheAgedCeiling(t *testing.T) {
	st := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.6",
		Ceiling: "0.5", LastMissLoad: "0.5", Samples: 100, LastSampleTime: metav1.NewTime(t0.Add(-2 * time.Hour))}}}
	out := Decide(sloInput(sloSpecOf(1, 40), 10, 10, 4, 1.5, 0, st), t0)
	if c, _ := sloOf(t, out.Status); math.Abs(c-0.4/sloShare) > 1e-6 {
		t.Fatalf("capacity %g after a tight window at 0.4 a replica, two hours after a miss at 0.5: want %g", c, 0.4/sloShare)
	}
	out = Decide(sloInput(sloSpecOf(1, 40), 20, 20, 4, 1.5, 0, st), t0)
	if c, _ := sloOf(t, out.Status); c != 0.6 {
		t.Fatalf("capacity %g after a tight window at 0.2 a replica (light: at most 0.7 of the last miss's 0.5): want 0.6 kept", c)
	}
}

// The last miss's load is taken only from a window without a scale-up within two windows and
// a cold start: one measured while new pods came up reads the load over more Ready replicas
// than served most of it, too low, and would leave no load light (a long-context workload's
// fleet then stayed at 25-30 replicas where 10-16 meet the SLO). Such a miss still lowers the
// capacity, as before.
func TestAMissWhilePodsComeUpSetsNoLastMissLoad(t *testing.T) {
	prevAt := t0.Add(-time.Minute)
	st := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.2",
		LastMissLoad: "0.27", Samples: 8, LastSampleTime: metav1.NewTime(prevAt)}},
		Events: []v1alpha1.ScaleEvent{{At: metav1.NewTime(t0.Add(-2 * time.Minute)), From: 12, To: 16}}}
	out := Decide(sloInput(sloSpecOf(1, 40), 16, 14, 1.69, 2.3, 0, st), t0)
	lc := out.Status.LearnedCapacities[0]
	if lc.LastMissLoad != "0.27" {
		t.Fatalf("lastMissLoad %q after a miss on 14 Ready of 16, two minutes after a scale-up: want 0.27 kept", lc.LastMissLoad)
	}
	if c, _ := sloOf(t, out.Status); !(c < 0.2) {
		t.Fatalf("capacity %g after the miss, want it lowered below 0.2", c)
	}
	st.Events = nil
	out = Decide(sloInput(sloSpecOf(1, 40), 14, 14, 1.69, 2.3, 0, st), t0)
	if got := out.Status.LearnedCapacities[0].LastMissLoad; got != "0.120714" {
		t.Fatalf("lastMissLoad %q after a miss on 14 settled replicas, want 0.120714 (1.69/14)", got)
	}
}

// A burst's backlog drains (2,000 queued, then 500, then none): its requests' wait is the p95
// TTFT of the windows until the last of them is served, a window after the queue is gone. Those
// windows are no lesson: what the burst's miss learnt stays (with the queue kept for two
// windows and the TTFT left out, as while requests queue), where a TTFT of 60 times the SLO
// read as load would take the lighter load after the burst for where the replicas miss.
func TestABacklogsWaitIsNoLesson(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(10, 10), cur: 10, at: t0} // a fleet held at 10: every miss teaches
	for range 10 {
		r.step(5, 0.4, 0)
	}
	r.step(5, 0.4, 2000) // a burst: a miss
	missed := *r.prev
	r.step(4, 0.4, 500) // draining
	r.step(3, 120, 0)   // the queue gone, the backlog's TTFT in the window
	if got, want := r.prev.LearnedCapacities[0], missed.LearnedCapacities[0]; got.PerReplica != want.PerReplica || got.Ceiling != want.Ceiling || got.LastMissLoad != want.LastMissLoad {
		t.Fatalf("after the backlog's window: capacity %s, ceiling %s, last miss %s; want the burst's %s, %s, %s",
			got.PerReplica, got.Ceiling, got.LastMissLoad, want.PerReplica, want.Ceiling, want.LastMissLoad)
	}
	if r.prev.Queue == nil {
		t.Fatal("the queue seen a minute ago was dropped: the next window would read the backlog's wait as load")
	}
}

// The backlog's last requests are served after the queue was last seen: windows read two
// windows on can still hold them, with a p95 TTFT of minutes at the lighter load after the
// burst. While the window's p95 TTFT is at least the window (its requests arrived before it
// began) the queue stays in status and the window teaches nothing (read as load, it set a
// ceiling at the load after a flash crowd, 0.42 where a replica carried 0.76, and the fleet
// stayed at maxReplicas). Without a queue before it, such a TTFT is a miss as any.
func TestAWaitLongerThanTheWindowIsNoLesson(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(10, 10), cur: 10, at: t0}
	for range 10 {
		r.step(5, 0.4, 0)
	}
	r.step(5, 0.4, 2000) // a burst: a miss
	r.step(4, 0.4, 500)  // draining
	before := r.prev.LearnedCapacities[0]
	for i := range 3 { // the queue gone; its waits, 90 s in a 1-minute window, still read
		r.step(3, 90, 0)
		if got := r.prev.LearnedCapacities[0]; got.PerReplica != before.PerReplica || got.Ceiling != before.Ceiling || got.LastMissLoad != before.LastMissLoad {
			t.Fatalf("window %d after the queue, a 90 s p95 TTFT: capacity %s, ceiling %s, last miss %s; want %s, %s, %s kept",
				i+1, got.PerReplica, got.Ceiling, got.LastMissLoad, before.PerReplica, before.Ceiling, before.LastMissLoad)
		}
		if r.prev.Queue == nil {
			t.Fatalf("window %d after the queue: dropped from status while its waits are read", i+1)
		}
	}
	r.step(3, 0.4, 0)
	if r.prev.Queue != nil {
		t.Fatalf("queue %+v still kept once the waits are gone", r.prev.Queue)
	}
	// No queue before it: a 90 s p95 TTFT is a miss as any, and teaches (at a load above the
	// floor: below it no miss does, see TestAMissBelowTheFloorTeachesNothing; and on a load read
	// that did not rise by a quarter since the pass before, see
	// TestAMissWhileTheLoadReadRisesIsNoLesson).
	r.step(5, 0.4, 0)
	r.step(6, 90, 0)
	if got := r.prev.LearnedCapacities[0]; got.LastMissLoad == before.LastMissLoad {
		t.Fatalf("a 90 s p95 TTFT with no queue before it taught nothing: last miss %s, want 0.6", got.LastMissLoad)
	}
}

// While a backlog drains, the load read (the tokens served) rises as the pods asked for come
// Ready: a rise of what the fleet serves, not of what arrives. It is not projected (a flash
// crowd's backlog took the fleet to maxReplicas along it).
func TestABacklogsRiseIsNotProjected(t *testing.T) {
	spec := sloSpecOf(1, 40)
	spec.ProjectionHorizon = v1alpha1.Duration{Duration: 3 * time.Minute}
	st := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "1", Floor: "0.5",
		Samples: 10, LastSampleTime: metav1.NewTime(t0.Add(-30 * time.Second))}},
		Queue: &v1alpha1.QueueSample{At: metav1.NewTime(t0.Add(-15 * time.Second)), Requests: 100}}
	in := sloInput(spec, 10, 10, 8.4, 0.4, 30, st)
	in.Load.Trend, in.Load.HasTrend = 0.02, true
	if out := Decide(in, t0); out.Desired != 10 {
		t.Fatalf("desired %d with a backlog draining (100 -> 30 queued), want 10: no projection (%+v)", out.Desired, out.Status.Proposals)
	}
}

// The latency floor is read, as the last miss's load is, only from a window the same replicas
// served throughout: two minutes after a scale-up, with pods still starting, some of the Ready
// ones came Ready within the window and u reads light where the replicas carried more (on
// long-context the floor so went 0.64 -> 0.55 -> 0.50).
func TestTheLatencyFloorIsNotReadWhilePodsComeUp(t *testing.T) {
	prevAt := t0.Add(-time.Minute)
	st := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.2",
		LastMissLoad: "0.27", LatencyFloor: "0.64", Samples: 8, LastSampleTime: metav1.NewTime(prevAt)}},
		Events: []v1alpha1.ScaleEvent{{At: metav1.NewTime(t0.Add(-2 * time.Minute)), From: 12, To: 16}}}
	// 14 Ready of 16 at 1.4 of token work: 0.1 a replica, light (at most 0.7 of 0.27); p95 TTFT 1.1s.
	out := Decide(sloInput(sloSpecOf(1, 40), 16, 14, 1.4, 1.1, 0, st), t0)
	if lf := out.Status.LearnedCapacities[0].LatencyFloor; lf != "0.64" {
		t.Fatalf("latency floor %q two minutes after a scale-up with pods starting, want 0.64 kept", lf)
	}
	st.Events = nil
	out = Decide(sloInput(sloSpecOf(1, 40), 14, 14, 1.4, 1.1, 0, st), t0)
	if lf := out.Status.LearnedCapacities[0].LatencyFloor; lf != "0.55" {
		t.Fatalf("latency floor %q on settled replicas, want 0.55 (1.1s of the 2s SLO)", lf)
	}
}

// A tenant with long prompts comes in: the requests served are 1.7x as heavy in token work as
// those the capacity was learnt on, and the window misses at 3.7x the SLO. The capacity goes to
// the window's bound at once (the floor, proven on the lighter mix, forgotten), so that the
// pods asked for during the cold start carry the new mix; the same miss on requests of the
// usual weight is one odd minute, and lowers the capacity no further than the floor.
func TestHeavierRequestsLearnTheCapacityAgain(t *testing.T) {
	prev := func() *v1alpha1.AutoscalingStatus {
		return &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "1", Floor: "0.8",
			Ceiling: "1.2", RequestWork: "0.08", Samples: 20, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
	}
	miss := func(served float64) Output { return servedPass(prev(), 3, 2.6, 7.4, served) }
	heavy := miss(19) // 0.137 token work per request
	c, floor := sloOf(t, heavy.Status)
	u := 2.6 / 3
	if math.Abs(c-u/2) > 1e-4 || floor > u/2+1e-4 {
		t.Fatalf("heavier requests: capacity %g, floor %g; want the bound %g (half the load per replica) and no floor above it", c, floor, u/2)
	}
	if heavy.Desired < 7 {
		t.Fatalf("heavier requests: %d replicas for a load of 2.6 at capacity %g, want at least 7", heavy.Desired, c)
	}
	lc := heavy.Status.LearnedCapacities[0]
	if got, _ := strconv.ParseFloat(lc.RequestWork, 64); math.Abs(got-2.6/19) > 1e-4 {
		t.Fatalf("requestWork %q after the change, want the window's %g", lc.RequestWork, 2.6/19)
	}
	if got, _ := strconv.ParseFloat(lc.LastMissLoad, 64); math.Abs(got-u) > 1e-4 {
		t.Fatalf("lastMissLoad %q after the change, want the window's load per replica %g", lc.LastMissLoad, u)
	}

	usual := miss(30) // 0.087 token work per request: the mix learnt on
	c, _ = sloOf(t, usual.Status)
	if c < 0.78 {
		t.Fatalf("usual requests: capacity %g, want lowered no further than the floor (0.8, a minute's decay)", c)
	}
	if got, _ := strconv.ParseFloat(usual.Status.LearnedCapacities[0].RequestWork, 64); math.Abs(got-(0.08+sloMixWeight*(2.6/30-0.08))) > 1e-4 {
		t.Fatalf("requestWork %q, want the average moved a quarter of the way to %g", usual.Status.LearnedCapacities[0].RequestWork, 2.6/30)
	}
	few := miss(0.25) // 15 requests in the window: too few to weigh the mix
	if c, _ = sloOf(t, few.Status); c < 0.78 {
		t.Fatalf("a window of 15 requests: capacity %g, want the mix not weighed (lowered no further than the floor)", c)
	}
}

// The long-prompt tenant gone: the requests served are 4x lighter in token work than those the
// capacity was learnt on (0.15 a replica, under a ceiling of 0.16 the long prompts missed at),
// and the window holds with margin at 0.1 a replica. The window is learnt as a first window is:
// C up as the requests lighten, to sloPrior at most (0.15 x 3.84, 0.58, is more), the heavier
// mix's ceiling, floor and latency floor forgotten, and the fleet sized at C. The same window on requests of the
// usual weight probes C by one step, held to the ceiling.
func TestLighterRequestsLearnTheCapacityAgain(t *testing.T) {
	prev := func() *v1alpha1.AutoscalingStatus {
		return &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.15", Floor: "0.12",
			Ceiling: "0.16", LatencyFloor: "0.5", LastMissLoad: "0.16", RequestWork: "0.48", Samples: 20, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
	}
	held := func(served float64) Output { return servedPass(prev(), 20, 2, 0.3, served) }
	lighter := held(16) // 0.125 token work per request
	c, floor := sloOf(t, lighter.Status)
	if c != sloPrior || math.Abs(floor-0.1) > 1e-6 {
		t.Fatalf("lighter requests: capacity %g, floor %g; want the prior %g and the window's load per replica 0.1", c, floor, sloPrior)
	}
	lc := lighter.Status.LearnedCapacities[0]
	if lc.Ceiling != "" || lc.LatencyFloor != "" || lc.LastMissLoad != "" {
		t.Fatalf("lighter requests: ceiling %q, latency floor %q, last miss %q; want the heavier mix's forgotten", lc.Ceiling, lc.LatencyFloor, lc.LastMissLoad)
	}
	if got, _ := strconv.ParseFloat(lc.RequestWork, 64); math.Abs(got-2.0/16) > 1e-6 {
		t.Fatalf("requestWork %q, want the window's %g", lc.RequestWork, 2.0/16)
	}
	if want := int32(math.Ceil(2 / (sloShare * sloPrior))); lighter.Desired != want {
		t.Fatalf("lighter requests: %d replicas, want %d (a load of 2 at %g of %g)", lighter.Desired, want, sloShare, sloPrior)
	}

	usual := held(4.2) // 0.476 token work per request: the mix learnt on
	if c, _ = sloOf(t, usual.Status); c > 0.16+1e-9 {
		t.Fatalf("usual requests: capacity %g, want held to the ceiling 0.16", c)
	}

	// Requests 2x as light (very long prompts gone, long ones left): C goes up as the requests
	// lighten, 0.15 to 0.3, not to the prior, which would size the long prompts' fleet below
	// what they need.
	st := prev()
	st.LearnedCapacities[0].RequestWork = "0.25"
	if c, _ = sloOf(t, servedPass(st, 20, 2, 0.3, 16).Status); math.Abs(c-0.3) > 1e-6 {
		t.Fatalf("requests 2x as light: capacity %g, want 0.3 (0.15 times 2)", c)
	}
}

// Traffic ten times as heavy in a minute after light ones: the first window after the rise reads
// a load per replica of 0.3 (its average, mostly before the rise: the rate read rose from 0.27 to
// 0.6 since the last pass) at a p95 TTFT of 5 s (the requests after it). The miss teaches nothing:
// no ceiling at 0.3, C kept. The same miss on a load read as steady lowers C and sets the ceiling.
func TestAMissWhileTheLoadReadRisesIsNoLesson(t *testing.T) {
	prev := func(lastLoad string) *v1alpha1.AutoscalingStatus {
		return &v1alpha1.AutoscalingStatus{
			LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.5", Floor: "0.14", RequestWork: "0.2",
				Samples: 20, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}},
			Proposals: []v1alpha1.Proposal{{Metric: MetricSLO, Value: lastLoad}},
		}
	}
	missEvery := func(interval time.Duration, lastLoad string) v1alpha1.LearnedCapacity {
		spec := sloSpecOf(2, 40)
		spec.Interval.Duration = interval
		in := sloInput(spec, 2, 2, 0.6, 5, 0, prev(lastLoad))
		in.Served = ok(3)
		return Decide(in, t0).Status.LearnedCapacities[0]
	}
	miss := func(lastLoad string) v1alpha1.LearnedCapacity { return missEvery(0, lastLoad) }
	if lc := miss("0.271"); lc.PerReplica != "0.5" || lc.Ceiling != "" {
		t.Fatalf("a miss as the load read rose 0.271 -> 0.6: capacity %s, ceiling %q; want 0.5 kept and no ceiling", lc.PerReplica, lc.Ceiling)
	}
	if lc := miss("0.45"); lc.PerReplica != "0.5" || lc.Ceiling != "" {
		t.Fatalf("a miss as the load read rose 0.45 -> 0.6 in 15 s of a 1-minute rate: capacity %s, ceiling %q; want 0.5 kept and no ceiling", lc.PerReplica, lc.Ceiling)
	}
	if lc := miss("0.58"); lc.PerReplica == "0.5" || lc.Ceiling != "0.3" {
		t.Fatalf("a miss on a steady load read: capacity %s, ceiling %q; want C lowered and the ceiling at 0.3", lc.PerReplica, lc.Ceiling)
	}
	// Read once a window (spec.autoscaling.interval 1m): two reads share no sample, and only a
	// rate that more than doubled says the load rose within this window.
	if lc := missEvery(time.Minute, "0.45"); lc.Ceiling != "0.3" {
		t.Fatalf("interval 1m, a miss as the load read rose 0.45 -> 0.6: ceiling %q; want the lesson taken (0.3)", lc.Ceiling)
	}
	if lc := missEvery(time.Minute, "0.271"); lc.Ceiling != "" {
		t.Fatalf("interval 1m, a miss as the load read rose 0.271 -> 0.6: ceiling %q; want no lesson", lc.Ceiling)
	}
}

// A probe raises C up to its limit and never lowers it: after a spike's miss left C at 0.41
// (halfway to the miss's bound), a window held with margin at half that a replica, on a
// floor proven at that light load (0.155), probed C to 1.35 times the floor, 0.21, halving it.
func TestAProbeNeverLowersTheCapacity(t *testing.T) {
	spec := sloSpecOf(1, 20)
	prev := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO,
		PerReplica: "0.41", Floor: "0.155", Ceiling: "0.64", Samples: 8, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
	// 2 Ready replicas carrying 0.195 each, p95 TTFT 0.3 s of 2 s: held with margin, and the
	// load asks for more than Ready-1 replicas at C, so the window probes.
	out := Decide(sloInput(spec, 2, 2, 0.39, 0.3, 0, prev), t0)
	if c, _ := sloOf(t, out.Status); c < 0.41 {
		t.Errorf("capacity %g after a window held with margin, want at least the 0.41 it was", c)
	}
}

// A miss at a load per replica below the floor (what a replica carried holding the SLO with
// margin, within the floor's half-life) is not the load's: the last window before traffic
// stops (a handful of requests, a p95 TTFT of 3.4 s at 0.019 a replica) set the ceiling at
// 0.019, and C, held to it, fell with the floor for the rest of the hour. It teaches nothing;
// a miss at the floor's load still does.
func TestAMissBelowTheFloorTeachesNothing(t *testing.T) {
	spec := sloSpecOf(1, 20)
	prev := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO,
		PerReplica: "0.6", Floor: "0.45", Samples: 20, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
	out := Decide(sloInput(spec, 10, 10, 0.19, 3.4, 0, prev), t0)
	c, floor := sloOf(t, out.Status)
	if l := out.Status.LearnedCapacities[0]; c != 0.6 || l.Ceiling != "" {
		t.Errorf("capacity %g, ceiling %q after a miss at 0.019 a replica on a floor of %g; want 0.6 and no ceiling", c, l.Ceiling, floor)
	}
	at := Decide(sloInput(spec, 10, 10, 4.5, 3.4, 0, prev), t0)
	if c, _ := sloOf(t, at.Status); c >= 0.6 || at.Status.LearnedCapacities[0].Ceiling == "" {
		t.Errorf("capacity %g, ceiling %q after a miss at 0.45 a replica; want C lowered and a ceiling", c, at.Status.LearnedCapacities[0].Ceiling)
	}
}

// The latencies' floor is the light windows' low level, not the lowest ever seen: one lucky
// window (a few short prompts) set it at 0.3 of the SLO; a light window at 0.8 raises it a
// quarter of the way (twice: 0.425, then 0.52), a lower one (0.45) sets it at once, and a light
// window that misses does not raise it (no floor to read margins over).
func TestALightWindowAboveTheLatencyFloorRaisesIt(t *testing.T) {
	st := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.2",
		LastMissLoad: "0.27", LatencyFloor: "0.3", Samples: 8, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
	floorAfter := func(ttft float64, at time.Time) float64 {
		t.Helper()
		// 14 Ready replicas at 1.4 of token work: 0.1 each, light (at most 0.7 of 0.27).
		out := Decide(sloInput(sloSpecOf(1, 40), 14, 14, 1.4, ttft, 0, st), at)
		st = &out.Status
		lf, err := strconv.ParseFloat(st.LearnedCapacities[0].LatencyFloor, 64)
		if err != nil {
			t.Fatalf("latency floor %q: %v", st.LearnedCapacities[0].LatencyFloor, err)
		}
		return lf
	}
	if lf := floorAfter(1.6, t0); math.Abs(lf-(0.3+sloFloorRise*(0.8-0.3))) > 1e-3 {
		t.Fatalf("latency floor %g after a light window at 0.8 of the SLO over a floor of 0.3, want %g", lf, 0.3+sloFloorRise*0.5)
	}
	raised := floorAfter(1.6, t0.Add(time.Minute))
	if !(raised > 0.42) {
		t.Fatalf("latency floor %g after a second light window at 0.8, want it raised again", raised)
	}
	if lf := floorAfter(0.9, t0.Add(2*time.Minute)); lf != 0.45 {
		t.Fatalf("latency floor %g after a light window at 0.45 of the SLO, want 0.45 at once", lf)
	}
	if lf := floorAfter(2.4, t0.Add(3*time.Minute)); lf != 0.45 {
		t.Fatalf("latency floor 0.45 -> %g on a light window that missed (1.2 of the SLO), want it kept", lf)
	}
}

// A long-prompt workload's p95 TTFT is 0.6-0.95 of the SLO whatever the fleet: a tight window
// at two thirds of the last miss's load per replica is the requests' latency, not the load's,
// and leaves C where it is (with light at half the miss's load it brought C to that load over
// the fleet's share at every window, 0.14 -> 0.077 in an hour); at 0.8 of it, above what is
// light and near where a fleet at C runs, a tight window still brings C down.
func TestATightWindowWellBelowTheLastMissKeepsTheCapacity(t *testing.T) {
	prev := func() *v1alpha1.AutoscalingStatus {
		return &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.14",
			LastMissLoad: "0.12", Ceiling: "0.13", Samples: 30, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
	}
	// 23 Ready at 1.8 of token work: 0.078 each, 0.65 of the miss's 0.12; p95 TTFT 1.7s of 2s.
	out := Decide(sloInput(sloSpecOf(1, 40), 23, 23, 1.8, 1.7, 0, prev()), t0)
	if c, _ := sloOf(t, out.Status); c != 0.14 {
		t.Fatalf("capacity %g after a tight window at 0.65 of the last miss's load, want 0.14 kept", c)
	}
	// 23 Ready at 2.2: 0.096 each, 0.8 of the miss's load.
	out = Decide(sloInput(sloSpecOf(1, 40), 23, 23, 2.2, 1.7, 0, prev()), t0)
	if c, _ := sloOf(t, out.Status); math.Abs(c-2.2/23/sloShare) > 1e-3 {
		t.Fatalf("capacity %g after a tight window at 0.8 of the last miss's load, want %g (its load over the share)", c, 2.2/23/sloShare)
	}
}

// A miss at a load per Ready replica beyond the capacity is what the capacity says: the count
// it asks for already answers it, and C stays. On the real bench a doubled load read on the 3
// Ready replicas of the 5 asked for (1.14 each where C was 0.833, a p95 TTFT of 4.5 s while the
// new pods loaded) took C to 0.663 and the fleet to 7 where 5 held it. A miss at a load C says
// a replica carries is a lesson, with pods starting or without.
func TestAMissBeyondTheCapacityIsNoLesson(t *testing.T) {
	prev := func(cur int32) *v1alpha1.AutoscalingStatus {
		st := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.833",
			Samples: 12, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
		if cur == 5 {
			st.Events = []v1alpha1.ScaleEvent{{At: metav1.NewTime(t0.Add(-22 * time.Second)), From: 3, To: 5}}
		}
		return st
	}
	for _, tc := range []struct {
		name       string
		cur, ready int32
		load       float64
		lowered    bool
		desired    int32
	}{
		{"beyond C, pods starting", 5, 3, 3.414, false, 5},
		{"beyond C, none starting", 3, 3, 3.414, false, 5},
		{"within C, pods starting", 5, 3, 2.4, true, 0},
		{"within C, none starting", 3, 3, 2.4, true, 0},
	} {
		out := Decide(sloInput(sloSpecOf(1, 10), tc.cur, tc.ready, tc.load, 4.5, 0, prev(tc.cur)), t0)
		c, _ := sloOf(t, out.Status)
		if lowered := c < 0.833; lowered != tc.lowered {
			t.Errorf("%s: capacity %g after a miss at %.3f a Ready replica on C 0.833; lowered %v, want %v", tc.name, c, tc.load/float64(tc.ready), lowered, tc.lowered)
		}
		if tc.desired > 0 && out.Desired != tc.desired {
			t.Errorf("%s: desired %d, want %d (%.3f over 85%% of 0.833)", tc.name, out.Desired, tc.desired, tc.load)
		}
	}
}

// A window held tightly just after pods came Ready: its latencies were read partly on fewer
// replicas, and C comes back to its load over the replicas Ready through the window (22 for
// half of it, 26 since: 24 on average), not over the 26 Ready now (azure-conv on 1.3x GPUs in
// the simulator: C 0.70 -> 0.59, on a load the 26 never carried at that latency).
func TestATightWindowIsReadOnTheReplicasReadyThroughIt(t *testing.T) {
	prev := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.73",
		Samples: 30, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
	in := sloInput(sloSpecOf(1, 40), 26, 26, 13.07, 1.44, 0, prev)
	in.ReadyOverWindow = 24
	c, _ := sloOf(t, Decide(in, t0).Status)
	if want := 13.07 / 24 / sloShare; math.Abs(c-want) > 1e-3 {
		t.Fatalf("capacity %g after a tight window on 24 Ready replicas on average (26 now), want %g", c, want)
	}
	in.ReadyOverWindow = 0 // unknown: the Ready now
	if c, _ := sloOf(t, Decide(in, t0).Status); math.Abs(c-13.07/26/sloShare) > 1e-3 {
		t.Fatalf("capacity %g with no average, want %g", c, 13.07/26/sloShare)
	}
}

// A tight window at a load per replica below the floor (replicas carried more than it with
// margin within the floor's half-life) is the traffic's, a burst inside the window, not the
// edge: C stays, as a miss there teaches nothing. At the floor or above, a tight window still
// brings C back to what held, and the floor is read in the window's requests: on requests
// heavier than those it was proven on, a replica carries less token work. (Held out, a self-exciting workload's p95 TTFT moved 0.7-1.9 s
// with its bursts whatever the count; each tight window took C to the load per replica of the
// moment, the floor decaying under it, 0.55 -> 0.40 with no miss: 6-7 replicas where 4 met every
// minute.)
func TestATightWindowBelowTheFloorKeepsTheCapacity(t *testing.T) {
	prev := func() *v1alpha1.AutoscalingStatus {
		return &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "0.55",
			Floor: "0.4", Samples: 20, LastSampleTime: metav1.NewTime(t0.Add(-time.Minute))}}}
	}
	// 5 Ready at 1.75 of token work: 0.35 each, below the floor; p95 TTFT 1.6 s of 2 s.
	out := Decide(sloInput(sloSpecOf(1, 20), 5, 5, 1.75, 1.6, 0, prev()), t0)
	if c, _ := sloOf(t, out.Status); math.Abs(c-0.55) > 1e-9 {
		t.Fatalf("capacity %g after a tight window at 0.35 a replica below the floor 0.4, want 0.55 kept", c)
	}
	// 4 Ready at 1.8: 0.45 each, above the floor.
	out = Decide(sloInput(sloSpecOf(1, 20), 4, 4, 1.8, 1.6, 0, prev()), t0)
	if c, _ := sloOf(t, out.Status); math.Abs(c-0.45/sloShare) > 1e-3 {
		t.Fatalf("capacity %g after a tight window at 0.45 a replica above the floor, want %g (its load over the share)", c, 0.45/sloShare)
	}
	// The floor proven on requests of 0.2 token work each, the window's 1.4x as heavy (0.28):
	// it is worth 0.4/1.4 = 0.29 a replica on them, and 0.35 a replica is above it, at the edge.
	heavier := prev()
	heavier.LearnedCapacities[0].RequestWork = "0.2"
	in := sloInput(sloSpecOf(1, 20), 5, 5, 1.75, 1.6, 0, heavier)
	in.Served = ok(1.75 / 0.28)
	out = Decide(in, t0)
	if c, _ := sloOf(t, out.Status); math.Abs(c-0.35/sloShare) > 1e-3 {
		t.Fatalf("capacity %g after a tight window at 0.35 a replica on requests 1.4x as heavy as the floor's, want %g (its load over the share)", c, 0.35/sloShare)
	}
}
