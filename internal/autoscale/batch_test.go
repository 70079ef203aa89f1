package autoscale

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// batchRun is sloRun with the requests running per Ready replica and the batch limit.
type batchRun struct {
	sloRun
	limit int32
}

func (r *batchRun) step(load, ttft, runningPerReplica float64) Output {
	in := sloInput(r.spec, r.cur, r.cur, load, ttft, 0, r.prev)
	in.BatchLimit, in.RequestsRunning = r.limit, ok(runningPerReplica*float64(r.cur))
	out := Decide(in, r.at)
	st := out.Status
	r.prev, r.cur, r.at = &st, out.Desired, r.at.Add(time.Minute)
	return out
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
			r := &batchRun{sloRun: sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}, limit: tc.limit}
			r.step(5, 0.4, tc.running)
			c0, _ := sloOf(t, *r.prev)
			for range 20 {
				r.step(5, 0.4, tc.running)
			}
			c, _ := sloOf(t, *r.prev)
			if probed := c > c0*1.05; probed != tc.wantProbe {
				t.Fatalf("capacity %g from %g after 20 minutes (%d replicas): probed %v, want %v", c, c0, r.cur, probed, tc.wantProbe)
			}
			if r.cur < tc.wantAtLeastCur {
				t.Errorf("%d replicas, want at least %d", r.cur, tc.wantAtLeastCur)
			}
		})
	}
}

// Requests running at 95% of the batch limit on every replica, with latencies far within the
// SLO and a load that asks for no more: the guard scales up to keep them at sloShare of the
// limit, before the batch is full and requests queue; and a low load cannot scale down below
// the replicas the running requests need.
func TestTheBatchGuardScalesUpBeforeTheBatchIsFull(t *testing.T) {
	spec := sloSpecOf(1, 40)
	prev := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "1", LastSampleTime: metav1.NewTime(t0)}}}
	for _, tc := range []struct {
		name          string
		cur           int32
		load, running float64
		limit         int32
		want          int32
	}{
		{name: "95% of the limit scales up", cur: 8, load: 8 * sloShare, running: 8 * 0.95 * 256, limit: 256, want: 9},
		{name: "without a limit the load decides", cur: 8, load: 8 * sloShare, running: 8 * 0.95 * 256, want: 8},
		{name: "a low load does not scale down below the running requests' need", cur: 8, load: 2, running: 8 * 0.8 * 256, limit: 256, want: 8},
		{name: "a low load with few running scales down", cur: 8, load: 2, running: 8 * 0.1 * 256, limit: 256, want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sloInput(spec, tc.cur, tc.cur, tc.load, 0.3, 0, prev)
			in.BatchLimit, in.RequestsRunning = tc.limit, ok(tc.running)
			out := Decide(in, t0.Add(30*time.Second))
			if out.Desired != tc.want {
				t.Fatalf("desired %d, want %d (%+v)", out.Desired, tc.want, out.Status.Proposals)
			}
			if tc.want > tc.cur && !strings.Contains(out.Status.LastScaleReason, batchPrefix) {
				t.Errorf("reason %q, want the batch guard named", out.Status.LastScaleReason)
			}
		})
	}
}

// Running requests beyond the stated limit (a pod running more engines than its flags say)
// make a window tight, never a miss: no ceiling is set, and the capacity comes back to what held
// (u), not below it as a miss's bound would take it.
func TestRunningBeyondTheStatedLimitIsNoMiss(t *testing.T) {
	r := &batchRun{sloRun: sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}, limit: 64}
	r.step(5, 0.4, 32)
	r.step(5, 0.4, 128)
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
