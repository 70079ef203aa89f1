package signals

import (
	"context"
	"math"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/metrics"
)

// The requests running, for the SLO's batch guard: one grouped query, totalled over the Ready
// pods only (vLLM's or SGLang's series, a deleted pod's and another namespace's left out).
func TestRequestsRunningTotalsTheReadyPods(t *testing.T) {
	q := &fakeQuerier{series: map[string][]metrics.Series{
		QueryRequestsRunning: {
			series(100, "namespace", "ml", "pod", "llama-a"),
			series(28, "namespace", "ml", "pod", "llama-b"),
			series(256, "namespace", "ml", "pod", "llama-deleted"),
			series(9, "namespace", "other", "pod", "llama-a"),
		},
	}}
	snap, _ := Fetch(context.Background(), q, DefaultQueries(), t0)
	got := snap.RequestsRunning([]autoscale.PodKey{pod("ml", "llama-a"), pod("ml", "llama-b"), pod("ml", "llama-c")})
	if got.Status != metrics.OK || got.Value != 128 || got.MissingPods != 1 {
		t.Fatalf("RequestsRunning = %+v, want 128 over 2 of 3 Ready pods", got)
	}
	if q.calls[QueryRequestsRunning] != 1 {
		t.Errorf("running query ran %d times, want once", q.calls[QueryRequestsRunning])
	}
	q.fail = map[string]error{QueryRequestsRunning: context.DeadlineExceeded}
	snap, _ = Fetch(context.Background(), q, DefaultQueries(), t0)
	if got := snap.RequestsRunning([]autoscale.PodKey{pod("ml", "llama-a")}); got.Status == metrics.OK {
		t.Errorf("RequestsRunning on a failed query = %+v, want no value", got)
	}
}

// Prometheus's own engine answers the running query per pod: vLLM's series summed over a pod's
// engines, SGLang's where a pod runs SGLang.
func TestTheRunningQueryReadsVLLMAndSGLangPerPod(t *testing.T) {
	got := promVector(t, map[string]float64{
		`vllm:num_requests_running{namespace="ml",pod="v-0",engine="0"}`: 40,
		`vllm:num_requests_running{namespace="ml",pod="v-0",engine="1"}`: 24,
		`sglang:num_running_reqs{namespace="ml",pod="s-0"}`:              7,
	}, QueryRequestsRunning, []metrics.Series{
		{Labels: map[string]string{"namespace": "ml", "pod": "v-0"}, Value: 64},
		{Labels: map[string]string{"namespace": "ml", "pod": "s-0"}, Value: 7},
	})
	snap, _ := Fetch(context.Background(), &fakeQuerier{series: map[string][]metrics.Series{QueryRequestsRunning: got}}, DefaultQueries(), t0)
	if o := snap.RequestsRunning([]autoscale.PodKey{pod("ml", "v-0"), pod("ml", "s-0")}); o.Value != 71 {
		t.Errorf("RequestsRunning = %+v, want 71", o)
	}
}

// The KV-cache use, for the SLO's KV guard: from the same grouped query as the kvCacheUsage
// metric, averaged over the Ready pods only, and carried by the built-in source into the
// signals Gather hands the autoscaler (no value on a failed query).
func TestKVCacheUsageAveragesTheReadyPodsForTheKVGuard(t *testing.T) {
	q := &fakeQuerier{series: map[string][]metrics.Series{
		QueryKVCacheUsage: {
			series(0.9, "namespace", "ml", "pod", "llama-a"),
			series(0.5, "namespace", "ml", "pod", "llama-b"),
			series(0.1, "namespace", "ml", "pod", "llama-deleted"),
			series(0.2, "namespace", "other", "pod", "llama-a"),
		},
	}}
	ms := &v1alpha1.ModelServer{Spec: v1alpha1.ModelServerSpec{Autoscaling: &v1alpha1.AutoscalingSpec{MaxReplicas: 4}}}
	target := Target{ModelServer: ms, Ready: []autoscale.PodKey{pod("ml", "llama-a"), pod("ml", "llama-b"), pod("ml", "llama-c")}}
	got, err := Gather(context.Background(), []Source{builtin{NewSnapshotCache(q, DefaultQueries(), time.Minute)}}, target, t0)
	if err != nil {
		t.Fatal(err)
	}
	if o := got.KVCacheUsage; o.Status != metrics.OK || math.Abs(o.Value-0.7) > 1e-9 || o.MissingPods != 1 {
		t.Fatalf("KVCacheUsage = %+v, want 0.7 over 2 of 3 Ready pods", o)
	}
	q.fail = map[string]error{QueryKVCacheUsage: context.DeadlineExceeded}
	got, _ = Gather(context.Background(), []Source{builtin{NewSnapshotCache(q, DefaultQueries(), time.Minute)}}, target, t0)
	if got.KVCacheUsage.Status == metrics.OK {
		t.Errorf("KVCacheUsage on a failed query = %+v, want no value", got.KVCacheUsage)
	}
	if got, _ := Gather(context.Background(), nil, target, t0); got.KVCacheUsage.Status != metrics.NoData {
		t.Errorf("KVCacheUsage without sources = %+v, want NoData", got.KVCacheUsage)
	}
}
