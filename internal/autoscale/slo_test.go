package autoscale

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

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
// comes down, and the probing stops at sloProbeCeiling times the floor (the load a replica was
// seen to carry holding the SLO).
func TestAComfortableMarginProbesTheCapacityUp(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}
	r.step(5, 0.4, 0)
	c0, _ := sloOf(t, *r.prev)
	for range 30 {
		r.step(5, 0.4, 0)
	}
	c, floor := sloOf(t, *r.prev)
	if c <= c0*1.2 || r.cur >= 10 {
		t.Fatalf("after 30 comfortable minutes: capacity %g (from %g), %d replicas; want it probed up and fewer replicas", c, c0, r.cur)
	}
	if c > sloProbeCeiling*floor*(1+1e-9) {
		t.Fatalf("capacity %g above %g times the floor %g", c, sloProbeCeiling, floor)
	}
}

// One odd minute (a burst inside it) misses the SLO at a load replicas have carried for an
// hour: the capacity comes down no further than the floor, so the fleet grows by a little, not
// by the miss's ratio, and the probing takes it back.
func TestOneOddMinuteCannotRatchetTheCapacity(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(1, 40), cur: 10, at: t0}
	for range 60 {
		r.step(5, 1.0, 0)
	}
	before, floor := sloOf(t, *r.prev)
	n := r.cur
	r.step(5, 8, 0) // a 4x miss: halfway to a quarter would halve the capacity
	after, _ := sloOf(t, *r.prev)
	if after < floor*0.99 || after >= before {
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
			if i == 0 && len(st.LearnedCapacities) == 0 {
				continue // nothing learnt without data
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
// capacity comes back to the floor instead of being probed further.
func TestATightMarginStopsProbing(t *testing.T) {
	r := &sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}
	for range 10 {
		r.step(5, 0.4, 0)
	}
	before, _ := sloOf(t, *r.prev)
	r.step(5, 1.5, 0)
	after, floor := sloOf(t, *r.prev)
	if after >= before || math.Abs(after-floor) > 1e-9 {
		t.Fatalf("capacity %g -> %g (floor %g), want it back to the floor", before, after, floor)
	}
}
