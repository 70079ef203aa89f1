package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestAFailingPassIsRetriedWithinMaxRetryDelay: a pass that fails every time (a write a webhook
// refuses) is retried quickly at first and never later than MaxRetryDelay, however long it has
// failed (controller-runtime's default grows to 16 minutes and held an aborted candidate's
// drain that long; TestAnAbortDoesNotWaitForAStableScaleUpTheWebhookRefuses).
func TestAFailingPassIsRetriedWithinMaxRetryDelay(t *testing.T) {
	l := retryLimiter()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "llm"}}
	var delays []time.Duration
	for range 40 {
		delays = append(delays, l.When(req))
	}
	if delays[0] > 10*time.Millisecond {
		t.Errorf("first retry after %s, want a quick one", delays[0])
	}
	for i, d := range delays {
		if d > MaxRetryDelay {
			t.Fatalf("retry %d after %s, more than MaxRetryDelay %s (all: %v)", i+1, d, MaxRetryDelay, delays)
		}
	}
	if last := delays[len(delays)-1]; last != MaxRetryDelay {
		t.Errorf("after 40 failures the retry comes after %s, want the cap %s", last, MaxRetryDelay)
	}
}
