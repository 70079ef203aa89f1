package signals

import (
	"context"
	"testing"

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
