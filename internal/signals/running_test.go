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
