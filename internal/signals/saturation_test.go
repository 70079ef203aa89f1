package signals

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/modelship/modelship/internal/autoscale"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
)

func withSaturation(m v1alpha1.SaturationMetric) specOpt {
	return func(s *v1alpha1.AutoscalingSpec) {
		s.Metrics = append(s.Metrics, v1alpha1.AutoscalingMetric{Saturation: &m})
	}
}

// replicaLoad is one pod's KV-cache use and queue.
type replicaLoad struct{ kv, queue float64 }

// saturationSnapshot is a snapshot of the signals for pods llama-0... with the given loads, as
// Prometheus would answer the grouped queries.
func saturationSnapshot(t *testing.T, loads []replicaLoad) (*autoscale.Snapshot, []autoscale.PodKey) {
	t.Helper()
	q := &fakeQuerier{series: map[string][]sample.Series{}}
	var ready []autoscale.PodKey
	for i, l := range loads {
		name := fmt.Sprintf("llama-%d", i)
		ready = append(ready, pod("ml", name))
		q.series[QueryKVCacheUsage] = append(q.series[QueryKVCacheUsage], series(l.kv, "namespace", "ml", "pod", name))
		q.series[QueryRequestsWaiting] = append(q.series[QueryRequestsWaiting], series(l.queue, "namespace", "ml", "pod", name))
	}
	snap, err := Fetch(context.Background(), q, DefaultQueries(), t0)
	if err != nil {
		t.Fatal(err)
	}
	return snap, ready
}

func even(n int, kv, queue float64) []replicaLoad {
	out := make([]replicaLoad, n)
	for i := range out {
		out[i] = replicaLoad{kv, queue}
	}
	return out
}

// TestSaturationProposals: llm-d's thresholds (saturated at 80% KV-cache or 5 queued, spare room
// 10% or 3), observed from the grouped signals and decided by autoscale.Decide without a scale-down window.
func TestSaturationProposals(t *testing.T) {
	defaults := withSaturation(v1alpha1.SaturationMetric{})
	cases := []struct {
		name       string
		spec       v1alpha1.AutoscalingSpec
		loads      []replicaLoad
		ready      int // Ready pods (the first of loads); -1 = all
		current    int32
		want       int32
		wantReason string // in the proposal's message
	}{
		{name: "all replicas saturated asks for one more per saturated replica", spec: newSpec(1, 20, defaults, noWindow),
			loads: even(4, 0.92, 1), ready: -1, current: 4, want: 8, wantReason: "all 4 measured replicas saturated"},
		{name: "one saturated and too little spare KV-cache on the others asks for one more", spec: newSpec(1, 20, defaults, noWindow),
			loads: []replicaLoad{{0.85, 0}, {0.75, 0}, {0.72, 0}, {0.74, 0}}, ready: -1, current: 4, want: 5, wantReason: "spare KV-cache 6.333% < 10%"},
		{name: "queues short of the spare room ask for more even with KV-cache to spare", spec: newSpec(1, 20, defaults, noWindow),
			loads: even(4, 0.3, 2.5), ready: -1, current: 4, want: 5, wantReason: "spare queue 2.5 < 3"},
		{name: "a queue at the threshold saturates its replica, and with two saturated of three the third's room is spare", spec: newSpec(1, 20, defaults, noWindow),
			loads: []replicaLoad{{0.1, 5}, {0.1, 5}, {0.1, 4}}, ready: -1, current: 3, want: 5, wantReason: "2 of 3 replicas saturated; spare queue 1 < 3"},
		{name: "saturated replicas beside one with ample room hold: the endpoint picker sends the load there (llm-d's rule)", spec: newSpec(1, 20, defaults, noWindow),
			loads: []replicaLoad{{0.1, 5}, {0.1, 5}, {0.1, 0}}, ready: -1, current: 3, want: 3, wantReason: "2 of 3 replicas saturated, 0 without samples: holding"},
		{name: "enough spare room on every replica holds", spec: newSpec(1, 20, defaults, noWindow),
			loads: even(4, 0.6, 1), ready: -1, current: 4, want: 4, wantReason: "no replica saturated; spare KV-cache 20%"},
		{name: "light load scales down one replica at a time (llm-d's simulation of one fewer)", spec: newSpec(1, 20, defaults, noWindow),
			loads: even(6, 0.3, 0), ready: -1, current: 6, want: 5, wantReason: "5 replicas keep the spare room"},
		{name: "no scale-down when one replica fewer would lack the spare room", spec: newSpec(1, 20, defaults, noWindow),
			loads: even(3, 0.5, 0), ready: -1, current: 3, want: 3, wantReason: "no replica saturated; spare KV-cache 30%"},
		{name: "queued requests bound the scale-down too", spec: newSpec(1, 20, defaults, noWindow),
			loads: even(6, 0.1, 1.5), ready: -1, current: 6, want: 5},
		{name: "a saturated replica forbids a scale-down however idle the others", spec: newSpec(1, 20, defaults, noWindow),
			loads: []replicaLoad{{0.95, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}}, ready: -1, current: 6, want: 6, wantReason: "1 of 6 replicas saturated, 0 without samples: holding"},
		{name: "a Ready replica without samples holds a scale-down", spec: newSpec(1, 20, defaults, noWindow),
			loads: even(4, 0.05, 0), ready: 5, current: 5, want: 5, wantReason: "1 without samples"},
		{name: "replicas still loading their model take the load of one more (no cascade)", spec: newSpec(1, 20, defaults, noWindow),
			loads: []replicaLoad{{0.9, 0}, {0.75, 0}, {0.75, 0}, {0.75, 0}}, ready: -1, current: 6, want: 6, wantReason: "the 2 replicas not measured yet will take that load"},
		{name: "custom thresholds: 85% KV-cache is not saturated under a 90% threshold", spec: newSpec(1, 20, withSaturation(v1alpha1.SaturationMetric{KVCacheThresholdPercent: 90, KVSpareTriggerPercent: ptr.To(int32(0))}), noWindow),
			loads: even(3, 0.85, 0), ready: -1, current: 3, want: 3},
		{name: "the scale-down window keeps the highest recommendation", spec: newSpec(1, 20, defaults),
			loads: even(6, 0.1, 0), ready: -1, current: 6, want: 6},
		{name: "maxReplicas bounds a saturated fleet", spec: newSpec(1, 6, defaults, noWindow),
			loads: even(4, 0.99, 9), ready: -1, current: 4, want: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, keys := saturationSnapshot(t, tc.loads)
			if tc.ready >= 0 {
				for i := len(keys); i < tc.ready; i++ {
					keys = append(keys, pod("ml", fmt.Sprintf("llama-new-%d", i)))
				}
			}
			o := snap.Observe(tc.spec, keys)
			out := autoscale.Decide(autoscale.Input{Spec: tc.spec, Current: tc.current, Ready: int32(len(keys)), Observations: o}, t0)
			if out.Desired != tc.want {
				t.Errorf("Desired = %d, want %d (proposals %+v)", out.Desired, tc.want, out.Status.Proposals)
			}
			p := out.Status.Proposals[0]
			if p.Metric != autoscale.MetricSaturation || !strings.Contains(p.Message, tc.wantReason) {
				t.Errorf("proposal %+v, want metric %s and a message containing %q", p, autoscale.MetricSaturation, tc.wantReason)
			}
			if out.Desired != tc.current && out.Event == nil {
				t.Error("a change without an event")
			}
		})
	}
}

// TestSaturationMissingDataHolds: a failed or absent signal is no data, never an idle fleet.
func TestSaturationMissingDataHolds(t *testing.T) {
	spec := newSpec(1, 20, withSaturation(v1alpha1.SaturationMetric{}), noWindow)
	ready := []autoscale.PodKey{pod("ml", "llama-0"), pod("ml", "llama-1")}
	for _, tc := range []struct {
		name string
		q    *fakeQuerier
		want sample.Status
	}{
		{"KV-cache query failed", &fakeQuerier{series: map[string][]sample.Series{QueryRequestsWaiting: {series(0, "namespace", "ml", "pod", "llama-0")}}, fail: map[string]error{QueryKVCacheUsage: errors.New("503")}}, sample.Error},
		{"queue query failed", &fakeQuerier{series: map[string][]sample.Series{QueryKVCacheUsage: {series(0, "namespace", "ml", "pod", "llama-0")}}, fail: map[string]error{QueryRequestsWaiting: errors.New("timeout")}}, sample.Error},
		{"no pod has both series", &fakeQuerier{series: map[string][]sample.Series{QueryKVCacheUsage: {series(0, "namespace", "ml", "pod", "llama-0")}, QueryRequestsWaiting: {series(0, "namespace", "ml", "pod", "llama-1")}}}, sample.NoData},
		{"NaN samples", &fakeQuerier{series: map[string][]sample.Series{QueryKVCacheUsage: {series(math.NaN(), "namespace", "ml", "pod", "llama-0")}, QueryRequestsWaiting: {series(0, "namespace", "ml", "pod", "llama-0")}}}, sample.NoData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, _ := Fetch(context.Background(), tc.q, DefaultQueries(), t0)
			o := snap.Observe(spec, ready)
			if o[0].Status != tc.want {
				t.Fatalf("observation %+v, want %s", o[0], tc.want)
			}
			out := autoscale.Decide(autoscale.Input{Spec: spec, Current: 5, Ready: 2, Observations: o}, t0)
			if out.Desired != 5 || out.MetricsAvailable {
				t.Errorf("Desired %d (available %v), want 5 held without data", out.Desired, out.MetricsAvailable)
			}
		})
	}
}

// TestSaturationSettlesWithoutOscillating drives autoscale.Decide on a fleet whose KV-cache load spreads
// evenly over the Ready replicas (each new replica Ready at the next pass): it settles on the
// fewest replicas that keep the trigger's room, and a drop in load walks it down one replica
// at a time, never back and forth.
func TestSaturationSettlesWithoutOscillating(t *testing.T) {
	spec := newSpec(1, 40, withSaturation(v1alpha1.SaturationMetric{}))
	var prev *v1alpha1.AutoscalingStatus
	cur := int32(1)
	now := t0
	changes := 0
	run := func(load float64, passes int) int32 {
		for range passes {
			snap, keys := saturationSnapshot(t, even(int(cur), load/float64(cur), 0))
			out := autoscale.Decide(autoscale.Input{Spec: spec, Current: cur, Ready: cur, Observations: snap.Observe(spec, keys), Previous: prev}, now)
			if out.Desired != cur {
				changes++
			}
			cur, prev = out.Desired, &out.Status
			now = now.Add(15 * time.Second)
		}
		return cur
	}
	// 2.6 replicas' worth of KV-cache: 4 replicas run at 65%, 3 would run at 87% (saturated).
	if got := run(2.6, 80); got != 4 {
		t.Fatalf("settled at %d replicas for a load of 2.6, want 4", got)
	}
	settledAfter := changes
	if got := run(2.6, 80); got != 4 || changes != settledAfter {
		t.Fatalf("moved after settling: %d replicas, %d more changes", got, changes-settledAfter)
	}
	// The load drops to 1.0: one replica at a time, each after the 5-minute window, down to 2
	// (50% each; 1 would hold 100%).
	if got := run(1.0, 80); got != 2 {
		t.Fatalf("settled at %d replicas for a load of 1.0, want 2", got)
	}
	if changes-settledAfter != 2 {
		t.Errorf("%d changes for one drop in load, want 2 (4 -> 3 -> 2)", changes-settledAfter)
	}
	dropped := changes
	if got := run(1.0, 80); got != 2 || changes != dropped {
		t.Fatalf("moved after settling at the lower load: %d replicas, %d more changes", got, changes-dropped)
	}
}

func TestEndpointPickerObservations(t *testing.T) {
	q := &fakeQuerier{series: map[string][]sample.Series{
		QueryPoolQueueSize: {
			series(4, "namespace", "ml", "name", "llama-blue"),
			series(1, "namespace", "ml", "name", "llama-green"),
			series(50, "namespace", "other", "name", "llama-blue"),
			// A pod of namespace other that writes team's pool into its own exposition: Prometheus
			// keeps the target's namespace and renames the written one exported_namespace.
			series(2, "namespace", "other", "exported_namespace", "team", "name", "chat-blue"),
		},
		QueryPoolSaturation: {
			series(0.9, "namespace", "ml", "inference_pool", "llama-blue"),
			series(0.3, "namespace", "ml", "name", "llama-green"),
		},
		QueryObjectiveRunning: {
			series(48, "namespace", "ml", "model_name", "meta-llama/Llama-3.1-8B-Instruct"),
			series(7, "namespace", "ml", "model_name", "other-model"),
		},
	}}
	snap, err := Fetch(context.Background(), q, DefaultQueries(), t0)
	if err != nil {
		t.Fatal(err)
	}
	pools := func(blue, green int32) []autoscale.Pool {
		return []autoscale.Pool{{Key: pod("ml", "llama-blue"), Ready: blue}, {Key: pod("ml", "llama-green"), Ready: green}}
	}
	epp := func(sig v1alpha1.EndpointPickerSignal, target, objective string) v1alpha1.AutoscalingSpec {
		return newSpec(1, 20, func(s *v1alpha1.AutoscalingSpec) {
			s.Metrics = append(s.Metrics, v1alpha1.AutoscalingMetric{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: sig, Target: resource.MustParse(target), Objective: objective}})
		}, noWindow)
	}
	cases := []struct {
		name     string
		spec     v1alpha1.AutoscalingSpec
		pools    []autoscale.Pool
		want     autoscale.Observation
		current  int32
		desired  int32
		wantNote string
	}{
		{name: "queue size averages both colors' pools by their Ready pods", spec: epp(v1alpha1.EndpointPickerQueueSize, "2", ""), pools: pools(3, 1),
			want: autoscale.Observation{Status: sample.OK, Value: 3.25, Pods: 4}, current: 4, desired: 7},
		{name: "queue size of a single serving color", spec: epp(v1alpha1.EndpointPickerQueueSize, "2", ""), pools: pools(0, 4),
			want: autoscale.Observation{Status: sample.OK, Value: 1, Pods: 4}, current: 4, desired: 2},
		{name: "pool saturation reads inference_pool and falls back to name", spec: epp(v1alpha1.EndpointPickerPoolSaturation, "0.6", ""), pools: pools(2, 2),
			want: autoscale.Observation{Status: sample.OK, Value: 0.6, Pods: 4}, current: 4, desired: 4},
		{name: "running requests of the objective, per replica", spec: epp(v1alpha1.EndpointPickerRunningRequests, "8", "meta-llama/Llama-3.1-8B-Instruct"), pools: pools(3, 0),
			want: autoscale.Observation{Status: sample.OK, Value: 48}, current: 3, desired: 6},
		{name: "a pool the endpoint picker does not report is missing, not idle", spec: epp(v1alpha1.EndpointPickerQueueSize, "2", ""),
			pools: []autoscale.Pool{{Key: pod("ml", "llama-blue"), Ready: 2}, {Key: pod("ml", "llama-absent"), Ready: 2}},
			want:  autoscale.Observation{Status: sample.OK, Value: 4, Pods: 2, MissingPods: 2}, current: 4, desired: 4},
		{name: "a series another namespace's pod wrote with exported_namespace is not the pool's", spec: epp(v1alpha1.EndpointPickerQueueSize, "2", ""),
			pools: []autoscale.Pool{{Key: pod("team", "chat-blue"), Ready: 2}},
			want:  autoscale.Observation{Status: sample.NoData}, current: 2, desired: 2, wantNote: "no endpoint picker series"},
		{name: "no series for any pool is no data", spec: epp(v1alpha1.EndpointPickerQueueSize, "2", ""),
			pools: []autoscale.Pool{{Key: pod("ml", "x-blue"), Ready: 2}}, want: autoscale.Observation{Status: sample.NoData}, current: 2, desired: 2, wantNote: "no endpoint picker series"},
		{name: "an unknown model name is no data", spec: epp(v1alpha1.EndpointPickerRunningRequests, "8", "mistral"), pools: pools(2, 0),
			want: autoscale.Observation{Status: sample.NoData}, current: 2, desired: 2, wantNote: `model_name "mistral"`},
		{name: "without pools there is nothing to read", spec: epp(v1alpha1.EndpointPickerQueueSize, "2", ""),
			want: autoscale.Observation{Status: sample.NoData}, current: 2, desired: 2, wantNote: "spec.gateway.backend is not InferencePool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := snap.Observe(tc.spec, nil, tc.pools...)
			if len(got) != 1 {
				t.Fatalf("observations %+v, want one", got)
			}
			g, w := got[0], tc.want
			if !strings.HasPrefix(g.Metric, autoscale.MetricEndpointPicker+"/") || g.Status != w.Status || g.Pods != w.Pods || g.MissingPods != w.MissingPods || (w.Status == sample.OK && g.Value != w.Value) {
				t.Errorf("observation %+v, want %+v", g, w)
			}
			if !strings.Contains(g.Message, tc.wantNote) {
				t.Errorf("message %q, want %q", g.Message, tc.wantNote)
			}
			out := autoscale.Decide(autoscale.Input{Spec: tc.spec, Current: tc.current, Ready: tc.current, Observations: got}, t0)
			if out.Desired != tc.desired {
				t.Errorf("Desired = %d, want %d (%+v)", out.Desired, tc.desired, out.Status.Proposals)
			}
		})
	}
}
