package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// The suite's controller runs with --query-policy=namespaced: a tenant's query reading every
// namespace is refused, with the field named, and what serves is left alone.
func TestQueryPolicyRefusesAnUnscopedQueryWithoutDisturbingServing(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "tenant")
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "serving", func() error { _, err := getDeployment(ns, "tenant-blue"); return err })
	markReady(t, ns, "tenant-blue")
	updateMS(t, ms, func(got *v1alpha1.ModelServer) {
		got.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.11.0"
		got.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "others-queue", Query: `max(vllm:num_requests_waiting)`, Max: ptr.To(mustQuantity("10"))}}
	})
	eventually(t, 20*time.Second, "Stalled with the field and the policy named", func() error {
		c := condition(getMS(t, ms), v1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonInvalidSpec ||
			!strings.Contains(c.Message, "spec.rollout.analysis.metrics[others-queue].query") || !strings.Contains(c.Message, "query policy (namespaced)") {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	if _, err := getDeployment(ns, "tenant-green"); !apierrors.IsNotFound(err) {
		t.Errorf("a candidate was started from a refused spec: %v", err)
	}
	if w, err := routeWeights(ns, ms); err != nil || w[v1alpha1.Blue] != 100 {
		t.Errorf("weights %v %v", w, err)
	}
}

func TestValidateAppliesTheQueryPolicyNamingTheField(t *testing.T) {
	scoped := `max(vllm:num_requests_waiting{namespace="{{.Namespace}}",pod=~"{{.Pods}}"})`
	unscoped := `max(vllm:num_requests_waiting)`
	withMetric := func(q string) func(*v1alpha1.ModelServer) {
		return func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Metrics = []v1alpha1.AnalysisMetric{{Name: "queue", Query: q, Max: ptr.To(mustQuantity("10"))}}
		}
	}
	withSample := func(q string) func(*v1alpha1.ModelServer) {
		return func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Analysis.SampleQuery = q }
	}
	withScaling := func(q string) func(*v1alpha1.ModelServer) {
		return func(ms *v1alpha1.ModelServer) {
			ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 2, Metrics: []v1alpha1.AutoscalingMetric{
				{GPUUtilization: &v1alpha1.GPUUtilizationMetric{}},
				{Prometheus: &v1alpha1.PrometheusMetric{Query: q, Target: resource.MustParse("5")}},
			}}
		}
	}
	withExternal := func(ms *v1alpha1.ModelServer) {
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 2, Metrics: []v1alpha1.AutoscalingMetric{
			{GPUUtilization: &v1alpha1.GPUUtilizationMetric{}},
			{External: &v1alpha1.ExternalMetric{MetricName: "queue_depth", Target: resource.MustParse("5")}},
		}}
	}
	cases := []struct {
		name    string
		policy  metrics.QueryPolicy
		edit    func(*v1alpha1.ModelServer)
		wantErr []string // empty: valid
	}{
		{"any admits an unscoped analysis metric", metrics.QueryPolicyAny, withMetric(unscoped), nil},
		{"namespaced admits the presets alone", metrics.QueryPolicyNamespaced, func(*v1alpha1.ModelServer) {}, nil},
		{"namespaced admits an analysis metric scoped to the namespace", metrics.QueryPolicyNamespaced, withMetric(scoped), nil},
		{"namespaced refuses an unscoped analysis metric, naming it", metrics.QueryPolicyNamespaced, withMetric(unscoped), []string{"spec.rollout.analysis.metrics[queue].query", "namespaced"}},
		{"namespaced refuses an unscoped sample query", metrics.QueryPolicyNamespaced, withSample(`sum(up)`), []string{"spec.rollout.analysis.sampleQuery", "namespaced"}},
		{"namespaced refuses an unscoped autoscaling query, naming its index", metrics.QueryPolicyNamespaced, withScaling(unscoped), []string{"spec.autoscaling.metrics[1].prometheus.query", "namespaced"}},
		{"presets admits the built-in signals", metrics.QueryPolicyPresets, func(ms *v1alpha1.ModelServer) {
			ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 2, Metrics: []v1alpha1.AutoscalingMetric{{GPUUtilization: &v1alpha1.GPUUtilizationMetric{}}}}
		}, nil},
		{"presets refuses even a scoped analysis metric", metrics.QueryPolicyPresets, withMetric(scoped), []string{"spec.rollout.analysis.metrics[queue].query", "presets"}},
		{"presets refuses a scoped autoscaling query", metrics.QueryPolicyPresets, withScaling(scoped), []string{"spec.autoscaling.metrics[1].prometheus.query", "presets"}},
		{"presets refuses an external metric, naming its index", metrics.QueryPolicyPresets, withExternal, []string{"spec.autoscaling.metrics[1].external", "presets", "external metrics"}},
		{"namespaced refuses an external metric", metrics.QueryPolicyNamespaced, withExternal, []string{"spec.autoscaling.metrics[1].external", "namespaced"}},
		{"no policy refuses an external metric, as namespaced", "", withExternal, []string{"spec.autoscaling.metrics[1].external", "namespaced"}},
		{"any admits an external metric", metrics.QueryPolicyAny, withExternal, nil},
		{"namespaced refuses a key outside a string that the ModelServer's name turns into another selector",
			metrics.QueryPolicyNamespaced, func(ms *v1alpha1.ModelServer) {
				ms.Name = "or"
				onPools(ms)
				withMetric(`vllm:num_requests_waiting{namespace="{{.Namespace}}"} {{.Pool}}`)(ms)
			}, []string{"spec.rollout.analysis.metrics[queue].query", "namespaced", "blue"}},
		{"namespaced admits the pool's key inside a string for the same ModelServer", metrics.QueryPolicyNamespaced, func(ms *v1alpha1.ModelServer) {
			ms.Name = "or"
			onPools(ms)
			withMetric(`vllm:num_requests_waiting{namespace="{{.Namespace}}",name=~"{{.Pool}}"}`)(ms)
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := newModelServer("ml", "llama")
			tc.edit(ms)
			err := validate(ms, tc.policy)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("admitted")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
