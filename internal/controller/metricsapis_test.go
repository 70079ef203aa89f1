package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	externalv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// testMetricsAPIs plays metrics-server and an external metrics adapter (prometheus-adapter,
// KEDA) per namespace, behind the controller's MetricsAPIs seam.
type testMetricsAPIs struct {
	mu       sync.Mutex
	cpu      map[string]map[string]string // namespace -> pod -> CPU usage
	external map[string]float64           // namespace/metric -> value
}

var kubeMetrics = &testMetricsAPIs{cpu: map[string]map[string]string{}, external: map[string]float64{}}

func (f *testMetricsAPIs) PodMetrics(_ context.Context, ns string, sel labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []metricsv1beta1.PodMetrics
	for pod, cpu := range f.cpu[ns] {
		out = append(out, metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "vllm", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}},
		})
	}
	return out, nil
}

func (f *testMetricsAPIs) External(_ context.Context, ns, metric string, _ labels.Selector) (*externalv1beta1.ExternalMetricValueList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.external[ns+"/"+metric]
	if !ok {
		return nil, fmt.Errorf("external metric %s not found", metric)
	}
	return &externalv1beta1.ExternalMetricValueList{Items: []externalv1beta1.ExternalMetricValue{{MetricName: metric, Value: *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI)}}}, nil
}

func withCPURequest(cpu string) msOption {
	return func(ms *v1alpha1.ModelServer) {
		c := &ms.Spec.Template.Spec.Containers[0]
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
}

func TestScalesOnTheResourceMetricsAPI(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "kube", withReplicas(2), withCPURequest("1"), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 8, Interval: v1alpha1.Duration{Duration: 200 * time.Millisecond},
			Metrics: []v1alpha1.AutoscalingMetric{
				{Resource: &v1alpha1.ResourceMetric{Name: corev1.ResourceCPU, Target: 50}},
			}}
	})
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, ns, "kube-blue", 2)

	// Given two Ready pods using 0.9 of their 1 CPU (90% against 50%).
	pods := runPods(t, ms, v1alpha1.Blue, 2, "")
	kubeMetrics.mu.Lock()
	kubeMetrics.cpu[ns] = map[string]string{pods[0]: "900m", pods[1]: "900m"}
	kubeMetrics.mu.Unlock()

	// Then CPU proposes ceil(2 * 90/50) = 4.
	eventually(t, 30*time.Second, "scaled to 4 on CPU", func() error {
		got := getMS(t, ms)
		a, err := autoscaling(got)
		if err != nil {
			return err
		}
		if a.DesiredReplicas != 4 {
			return fmt.Errorf("desired %d; %s", a.DesiredReplicas, describe(got))
		}
		return proposalOf(a, "resource/cpu", "90", "50", 4)
	})
	waitReplicas(t, ns, "kube-blue", 4)
}

// The external metrics API answers about any namespace with the controller's credentials: a
// controller started with --query-policy=any (an explicit opt-in) reads it; the default
// (namespaced, the suite's controller) refuses the spec (TestValidateAppliesTheQueryPolicyNamingTheField).
func TestScalesOnTheExternalMetricsAPIWithTheAnyQueryPolicy(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	r.QueryPolicy, r.MetricsAPIs = metrics.QueryPolicyAny, kubeMetrics
	metric := fmt.Sprintf("queue_depth_%d", time.Now().UnixNano()%1e6)
	ms := newModelServer(manualNamespace, fmt.Sprintf("external-%d", time.Now().UnixNano()%1e6), withReplicas(2), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 8, Interval: v1alpha1.Duration{Duration: 200 * time.Millisecond},
			Metrics: []v1alpha1.AutoscalingMetric{
				{External: &v1alpha1.ExternalMetric{MetricName: metric, Target: resource.MustParse("10")}},
			}}
	})
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	pass(t, r, ms)
	runPods(t, ms, v1alpha1.Blue, 2, "")
	// Given an external queue of 30 requests, 10 per replica wanted.
	kubeMetrics.mu.Lock()
	kubeMetrics.external[manualNamespace+"/"+metric] = 30
	kubeMetrics.mu.Unlock()

	// Then it proposes ceil(30 / 10) = 3.
	eventually(t, 30*time.Second, "scaled to 3 on the external queue", func() error {
		pass(t, r, ms)
		got := getMS(t, ms)
		a, err := autoscaling(got)
		if err != nil {
			return err
		}
		if a.DesiredReplicas != 3 {
			return fmt.Errorf("desired %d; %s", a.DesiredReplicas, describe(got))
		}
		return proposalOf(a, "external/"+metric, "30", "10", 3)
	})
}

// proposalOf checks the only proposal: its metric, value, target and proposed replicas.
func proposalOf(a *v1alpha1.AutoscalingStatus, metric, value, target string, replicas int32) error {
	if len(a.Proposals) != 1 {
		return fmt.Errorf("proposals %+v", a.Proposals)
	}
	p := a.Proposals[0]
	if p.Metric != metric || p.Value != value || p.Target != target || p.Replicas == nil || *p.Replicas != replicas {
		return fmt.Errorf("proposal %+v, want %s value %s target %s replicas %d", p, metric, value, target, replicas)
	}
	return nil
}
