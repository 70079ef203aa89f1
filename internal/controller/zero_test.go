package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// An autoscaled ModelServer scaled to zero is Ready while its request rate reads 0; when
// requests arrive and no replica can start (here the namespace's GPU quota is used up), or the
// rate has no data, it is not Ready, naming why; when the rate is back at 0 it is Ready again.
func TestAtZeroReplicasReadyOnlyWhileTheScaleFromZeroMetricReadsZero(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	gpuNode(t, ns, 8)
	// Playing the quota controller: no GPU left in the namespace.
	gpuQuota(t, ns, 0, 0)
	var mu sync.Mutex
	rate := promAnswer{value: 0}
	setRate := func(a promAnswer) { mu.Lock(); rate = a; mu.Unlock() }
	prometheus.set(ns, func(string) promAnswer { mu.Lock(); defer mu.Unlock(); return rate })

	ms := newModelServer(ns, "zero", onPool(ns), withAutoscaling(0, 2, 70, scaleDownWindow(0), func(a *v1alpha1.AutoscalingSpec) {
		a.Metrics = []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{
			Query: `sum(rate(gateway_requests_total{namespace="{{.Namespace}}"}[1m])) or vector(0)`, Target: resource.MustParse("5")}}}
	}))
	// minReplicas 0 written out: the Go client leaves a zero out, and the API server defaults it to 1.
	if err := k8s.Create(ctx, toUnstructured(t, ms, func(spec map[string]any) {
		spec["autoscaling"].(map[string]any)["minReplicas"] = 0
	})); err != nil {
		t.Fatal(err)
	}
	ready := func(status metav1.ConditionStatus, reason string, msg ...string) func() error {
		return func() error {
			got := getMS(t, ms)
			if a := got.Status.Autoscaling; a == nil || a.DesiredReplicas != 0 {
				return fmt.Errorf("autoscaling %+v, want 0 desired", a)
			}
			return conditionIs(got, v1alpha1.ConditionReady, status, reason, msg...)
		}
	}
	eventually(t, 30*time.Second, "Ready at zero with no request", ready(metav1.ConditionTrue, v1alpha1.ReasonAvailable, "0/0 available"))

	setRate(promAnswer{value: 5})
	eventually(t, 30*time.Second, "not Ready with requests and no replica", ready(metav1.ConditionFalse, v1alpha1.ReasonNoReplicaForLoad,
		"0 replicas while prometheus reads 5"))

	setRate(promAnswer{noData: true})
	eventually(t, 30*time.Second, "not Ready when nothing shows that no request waits", ready(metav1.ConditionFalse, v1alpha1.ReasonNoReplicaForLoad,
		"no metric that sees load without pods has data"))

	setRate(promAnswer{value: 0})
	eventually(t, 30*time.Second, "Ready again at zero with no request", ready(metav1.ConditionTrue, v1alpha1.ReasonAvailable))
}
