package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/rollout"
	"github.com/modelship/modelship/internal/signals"
)

// hungPrometheus accepts every query and answers none until released, ignoring deadlines, as a
// blackholed Prometheus behind a proxy that never times out would.
type hungPrometheus struct {
	release chan struct{}
	calls   atomic.Int32
}

func (h *hungPrometheus) Scalar(context.Context, string, time.Time) metrics.Sample {
	h.calls.Add(1)
	<-h.release
	return metrics.Sample{Status: metrics.Error, Message: "released"}
}

func (h *hungPrometheus) Vector(context.Context, string, time.Time) ([]metrics.Series, error) {
	h.calls.Add(1)
	<-h.release
	return nil, fmt.Errorf("released")
}

// passWithin runs one reconcile of ms and fails the test if it has not returned after a minute:
// a pass that waits on a hung call never returns at all.
func passWithin(t *testing.T, r *ModelServerReconciler, ms *v1alpha1.ModelServer) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the pass is still waiting on a hung Prometheus after a minute: it holds a reconcile worker")
	}
}

// TestAHungPrometheusHoldsNoWorkerAndAnAbortGoesThrough: the measurement's queries hang; the
// pass that starts it returns (its worker is free for other ModelServers), and an abort set
// while the queries still hang is carried out by the next pass.
func TestAHungPrometheusHoldsNoWorkerAndAnAbortGoesThrough(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	r.ScrapeInterval = 100 * time.Millisecond
	ms := newModelServer(manualNamespace, fmt.Sprintf("hung-%d", time.Now().UnixNano()%1e6))
	rev := manualRollout(t, r, ms, 1)

	hung := &hungPrometheus{release: make(chan struct{})}
	defer close(hung.release)
	woken := make(chan struct{}, 16)
	r.Prometheus = hung
	r.measurements = newJobs[*rollout.Measurement](context.Background(), 50*time.Millisecond, time.Minute, func(k types.NamespacedName) { woken <- struct{}{} })

	// Passes until a measurement is due and its queries hang.
	deadline := time.Now().Add(30 * time.Second)
	for hung.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no measurement started in 30s (status %+v)", getMS(t, ms).Status)
		}
		passWithin(t, r, ms)
		time.Sleep(100 * time.Millisecond)
	}
	passWithin(t, r, ms)
	if got := getMS(t, ms); got.Status.Phase != v1alpha1.PhaseProgressing || got.Status.Candidate == nil || got.Status.Candidate.Revision != rev {
		t.Fatalf("while the measurement hangs: phase %s candidate %+v, want the rollout held", got.Status.Phase, got.Status.Candidate)
	}

	updateMS(t, ms, func(m *v1alpha1.ModelServer) {
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, v1alpha1.AnnotationAbort, rev)
	})
	passWithin(t, r, ms)
	got := getMS(t, ms)
	if got.Status.Phase != v1alpha1.PhaseRolledBack || len(got.Status.History) == 0 || got.Status.History[0].Outcome != v1alpha1.OutcomeAborted {
		t.Fatalf("the abort waited on the hung Prometheus: phase %s history %+v", got.Status.Phase, got.Status.History)
	}
}

// TestAHungAutoscalingSourceHoldsNoWorker: an autoscaled ModelServer's custom metric queries a
// Prometheus that never answers; its signal sources run off the worker (signals.Cache), so each
// pass returns, the count stays the spec's last decision, and the ModelServer still comes up.
// (With the sources fetched inline the first pass never returns.)
func TestAHungAutoscalingSourceHoldsNoWorker(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	hung := &hungPrometheus{release: make(chan struct{})}
	defer close(hung.release)
	r.Prometheus = hung
	r.fetches = signals.NewCache(context.Background(), 50*time.Millisecond, time.Minute, nil)
	ms := newModelServer(manualNamespace, fmt.Sprintf("hungscale-%d", time.Now().UnixNano()%1e6), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Replicas = nil
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(2)), MaxReplicas: 4, Metrics: []v1alpha1.AutoscalingMetric{
			{Prometheus: &v1alpha1.PrometheusMetric{Query: `sum(vllm:num_requests_running{namespace="{{.Namespace}}"})`, Target: resource.MustParse("4")}},
		}}
	})
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	passWithin(t, r, ms)
	markReady(t, ms.Namespace, ms.DeploymentName(v1alpha1.Blue))
	for range 3 {
		passWithin(t, r, ms)
	}
	if hung.calls.Load() == 0 {
		t.Fatal("the custom metric was never queried")
	}
	got := getMS(t, ms)
	if got.Status.Phase != v1alpha1.PhaseHealthy || got.Status.Replicas != 2 {
		t.Errorf("phase %s with %d replicas, want Healthy at minReplicas 2 while the metric hangs", got.Status.Phase, got.Status.Replicas)
	}
}
