package autoscale

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// kvRun is sloRun with the Ready pods' KV-cache use.
type kvRun struct{ sloRun }

func (r *kvRun) step(load, ttft, kv float64) Output {
	in := sloInput(r.spec, r.cur, r.cur, load, ttft, 0, r.prev)
	in.KVCacheUsage = ok(kv)
	out := Decide(in, r.at)
	st := out.Status
	r.prev, r.cur, r.at = &st, out.Desired, r.at.Add(time.Minute)
	return out
}

// The latencies hold with a wide margin, but the KV caches are 70% full: the engines are one
// step from the cliff where they admit nothing more and requests queue (long outputs fill the
// cache before the batch), which no latency shows before it is crossed. The capacity is not
// probed up, and the fleet keeps its replicas. The same windows with the caches a third full
// (or no KV-cache use read) probe as before.
func TestAFillingKVCacheStopsProbing(t *testing.T) {
	for _, tc := range []struct {
		name           string
		kv             float64
		noData         bool
		wantProbe      bool
		wantAtLeastCur int32
	}{
		{name: "caches 70% full", kv: 0.7, wantAtLeastCur: 10},
		{name: "caches a third full", kv: 1.0 / 3, wantProbe: true},
		{name: "no KV-cache use read", kv: 0.7, noData: true, wantProbe: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &kvRun{sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}}
			step := func() {
				if tc.noData {
					in := sloInput(r.spec, r.cur, r.cur, 5, 0.4, 0, r.prev)
					out := Decide(in, r.at)
					st := out.Status
					r.prev, r.cur, r.at = &st, out.Desired, r.at.Add(time.Minute)
					return
				}
				r.step(5, 0.4, tc.kv)
			}
			step()
			c0, _ := sloOf(t, *r.prev)
			for range 20 {
				step()
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

// KV caches 95% full on every replica, with latencies far within the SLO and a load that asks
// for no more: the guard scales up to keep them at sloShare of full, before they fill and
// requests queue; and a low load cannot scale down below the replicas the caches' use needs.
func TestTheKVGuardScalesUpBeforeTheCachesFill(t *testing.T) {
	spec := sloSpecOf(1, 40)
	prev := &v1alpha1.AutoscalingStatus{LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: MetricSLO, PerReplica: "1", LastSampleTime: metav1.NewTime(t0)}}}
	for _, tc := range []struct {
		name     string
		cur      int32
		load, kv float64
		want     int32
	}{
		{name: "caches 95% full scale up", cur: 8, load: 8 * sloShare, kv: 0.95, want: 9},
		{name: "without a KV-cache use the load decides", cur: 8, load: 8 * sloShare, want: 8},
		{name: "a low load does not scale down below the caches' need", cur: 8, load: 2, kv: 0.8, want: 8},
		{name: "a low load with caches nearly empty scales down", cur: 8, load: 2, kv: 0.1, want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sloInput(spec, tc.cur, tc.cur, tc.load, 0.3, 0, prev)
			if tc.kv > 0 {
				in.KVCacheUsage = ok(tc.kv)
			}
			out := Decide(in, t0.Add(30*time.Second))
			if out.Desired != tc.want {
				t.Fatalf("desired %d, want %d (%+v)", out.Desired, tc.want, out.Status.Proposals)
			}
			if tc.want > tc.cur && !strings.Contains(out.Status.LastScaleReason, kvPrefix) {
				t.Errorf("reason %q, want the KV guard named", out.Status.LastScaleReason)
			}
		})
	}
}

// A full KV cache makes a window tight, never a miss: no ceiling is set, and the capacity comes
// back to what held (u), not below it as a miss's bound would take it (a queue is what shows
// a miss).
func TestAFullKVCacheIsNoMiss(t *testing.T) {
	r := &kvRun{sloRun{spec: sloSpecOf(1, 20), cur: 10, at: t0}}
	r.step(5, 0.4, 0.3)
	r.step(5, 0.4, 1)
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
