package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/plan"
)

// observe only reads: the ModelServer it is given comes back as it went in (the autoscaler's
// status included: before the plan package existed, observe wrote it there so that the rollout
// machine's copy would carry it), and nothing is written to the API server. The plan decides
// from what it read.
func TestObserveOnlyReads(t *testing.T) {
	var w writeCounter
	r := manualReconciler(t, w.funcs())
	ms := newModelServer(manualNamespace, fmt.Sprintf("observe-%d", time.Now().UnixNano()%1e6), withGPU("1", ""), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Replicas = nil
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(2)), MaxReplicas: 4}
	})
	ctx := context.Background()
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	got := getMS(t, ms)
	seen := got.DeepCopy()
	w.take()
	now := time.Now()
	obs, err := r.observe(ctx, got, now, false)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	if !equality.Semantic.DeepEqual(got, seen) {
		t.Errorf("observe changed the ModelServer:\nstatus before %+v\nstatus after  %+v", seen.Status, got.Status)
	}
	if writes := w.take(); len(writes) != 0 {
		t.Errorf("observe wrote %v", writes)
	}
	if obs.Autoscaling == nil {
		t.Fatal("observe read no autoscaling signals for an autoscaled ModelServer")
	}
	if obs.Capacity == nil {
		t.Error("observe read no capacity view for a ModelServer whose pods need GPUs")
	}
	p := plan.Plan(got, obs, now)
	if p.Status.Autoscaling == nil || p.Scale == nil || p.Status.Autoscaling.DesiredReplicas != p.Scale.Desired {
		t.Errorf("the plan's status carries autoscaling %+v, want the autoscaler's decision %+v", p.Status.Autoscaling, p.Scale)
	}
	if !equality.Semantic.DeepEqual(got, seen) {
		t.Error("plan changed the ModelServer")
	}
}
