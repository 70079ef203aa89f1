package autoscale

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// guardRun is sloRun with a guard's signal (the batch's, the KV cache's) set on each pass's
// input; set nil: none.
type guardRun struct {
	sloRun
	set func(in *Input)
}

func (r *guardRun) step(load, ttft float64) Output {
	in := sloInput(r.spec, r.cur, r.cur, load, ttft, 0, r.prev)
	if r.set != nil {
		r.set(&in)
	}
	out := Decide(in, r.at)
	st := out.Status
	r.prev, r.cur, r.at = &st, out.Desired, r.at.Add(time.Minute)
	return out
}

// probing runs 21 windows that hold the SLO with a wide margin (a load of 5 on 10 replicas at
// first, a p95 TTFT of 0.4 s) with set on each, and fails t unless the capacity was probed up
// (by more than 5%) as wantProbe says and at least wantAtLeast replicas are left.
func probing(t *testing.T, set func(in *Input), wantProbe bool, wantAtLeast int32) {
	t.Helper()
	r := &guardRun{sloRun: sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}, set: set}
	r.step(5, 0.4)
	c0, _ := sloOf(t, *r.prev)
	for range 20 {
		r.step(5, 0.4)
	}
	c, _ := sloOf(t, *r.prev)
	if probed := c > c0*1.05; probed != wantProbe {
		t.Fatalf("capacity %g from %g after 20 minutes (%d replicas): probed %v, want %v", c, c0, r.cur, probed, wantProbe)
	}
	if r.cur < wantAtLeast {
		t.Errorf("%d replicas, want at least %d", r.cur, wantAtLeast)
	}
}

// guardPass is one pass on cur Ready replicas of a capacity of 1 learnt, at the load, a p95 TTFT
// of 0.3 s, and set's signal, which wants want replicas; a scale-up names prefix as its reason.
func guardPass(t *testing.T, cur int32, load float64, set func(in *Input), want int32, prefix string) {
	t.Helper()
	prev := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "1", LastSampleTime: metav1.NewTime(t0)}}}
	in := sloInput(sloSpecOf(1, 40), cur, cur, load, 0.3, 0, prev)
	set(&in)
	out := Decide(in, t0.Add(30*time.Second))
	if out.Desired != want {
		t.Fatalf("desired %d, want %d (%+v)", out.Desired, want, out.Status.Proposals)
	}
	if want > cur && !strings.Contains(out.Status.LastScaleReason, prefix) {
		t.Errorf("reason %q, want %q named", out.Status.LastScaleReason, prefix)
	}
}

// noMiss runs a window with the guard's signal low (lowSet), then one with it beyond its cliff
// (highSet), both at a load of 5 on 10 replicas and a p95 TTFT of 0.4 s: the second is tight,
// never a miss; no ceiling is set, and the capacity comes back to what held (u), not below it
// as a miss's bound would take it (a queue is what shows a miss).
func noMiss(t *testing.T, lowSet, highSet func(in *Input)) {
	t.Helper()
	r := &guardRun{sloRun: sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}, set: lowSet}
	r.step(5, 0.4)
	r.set = highSet
	r.step(5, 0.4)
	c, _ := sloOf(t, *r.prev)
	if u := 5.0 / 10; c < u {
		t.Errorf("capacity %g below the %g a replica carried: read as a miss", c, u)
	}
	for _, lc := range r.prev.LearnedCapacities {
		if lc.Metric == MetricSLO && lc.Ceiling != "" {
			t.Errorf("ceiling %s set by a window without a miss", lc.Ceiling)
		}
	}
}

// batch sets the batch limit and the requests running per Ready replica on a pass's input.
func batch(limit int32, runningPerReplica float64) func(in *Input) {
	return func(in *Input) {
		in.BatchLimit, in.RequestsRunning = limit, ok(runningPerReplica*float64(in.Ready))
	}
}

// The latencies hold with a wide margin, but each replica runs 70% of its batch limit: the
// engine is one step from the cliff where requests queue, which no latency shows before it is
// crossed. The capacity is not probed up, and the fleet keeps its replicas. The same windows
// with the batch a third full (or no batch limit known) probe as before.
func TestTheBatchLimitStopsProbing(t *testing.T) {
	for _, tc := range []struct {
		name           string
		limit          int32
		running        float64
		wantProbe      bool
		wantAtLeastCur int32
	}{
		{name: "batch at 70% of its limit", limit: 128, running: 0.7 * 128, wantAtLeastCur: 10},
		{name: "batch at a third of its limit", limit: 128, running: 128.0 / 3, wantProbe: true},
		{name: "no batch limit known", limit: 0, running: 0.7 * 128, wantProbe: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probing(t, batch(tc.limit, tc.running), tc.wantProbe, tc.wantAtLeastCur)
		})
	}
}

// Requests running at 95% of the batch limit on every replica, with latencies far within the
// SLO and a load that asks for no more: the guard scales up to keep them at sloShare of the
// limit, before the batch is full and requests queue; and a low load cannot scale down below
// the replicas the running requests need.
func TestTheBatchGuardScalesUpBeforeTheBatchIsFull(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cur           int32
		load, running float64
		limit         int32
		want          int32
	}{
		{name: "95% of the limit scales up", cur: 8, load: 8 * sloShare, running: 0.95 * 256, limit: 256, want: 9},
		{name: "without a limit the load decides", cur: 8, load: 8 * sloShare, running: 0.95 * 256, want: 8},
		{name: "a low load does not scale down below the running requests' need", cur: 8, load: 2, running: 0.8 * 256, limit: 256, want: 8},
		{name: "a low load with few running scales down", cur: 8, load: 2, running: 0.1 * 256, limit: 256, want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			guardPass(t, tc.cur, tc.load, batch(tc.limit, tc.running), tc.want, batchPrefix)
		})
	}
}

// Running requests beyond the stated limit (a pod running more engines than its flags say)
// make a window tight, never a miss: no ceiling is set, and the capacity comes back to what held
// (u), not below it as a miss's bound would take it.
func TestRunningBeyondTheStatedLimitIsNoMiss(t *testing.T) {
	noMiss(t, batch(64, 32), batch(64, 128))
}
