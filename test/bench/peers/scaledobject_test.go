package peers

import (
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

func TestScaledObject(t *testing.T) {
	spec := ScaledObjectSpec{
		Namespace: "ns", Name: "so", Deployment: "app",
		MinReplicas: 2, MaxReplicas: 10, PollingInterval: 5 * time.Second,
		Prometheus: PrometheusTrigger{ServerAddress: "http://127.0.0.1:9090", Query: "vector(350)", Threshold: 70.5},
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
		},
	}
	so, err := ScaledObject(spec)
	if err != nil {
		t.Fatal(err)
	}
	if so.GetAPIVersion() != "keda.sh/v1alpha1" || so.GetKind() != "ScaledObject" || so.GetNamespace() != "ns" || so.GetName() != "so" {
		t.Errorf("object %s %s %s/%s", so.GetAPIVersion(), so.GetKind(), so.GetNamespace(), so.GetName())
	}
	for path, want := range map[string]any{
		"spec.scaleTargetRef.name": "app",
		"spec.scaleTargetRef.kind": "Deployment",
		"spec.minReplicaCount":     int64(2),
		"spec.maxReplicaCount":     int64(10),
		"spec.pollingInterval":     int64(5),
		"spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds": int64(0),
	} {
		got, _, err := unstructured.NestedFieldNoCopy(so.Object, strings.Split(path, ".")...)
		if err != nil || got != want {
			t.Errorf("%s = %v (%T), want %v (err %v)", path, got, got, want, err)
		}
	}
	triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
	if len(triggers) != 1 {
		t.Fatalf("triggers %v", triggers)
	}
	tr := triggers[0].(map[string]any)
	md := tr["metadata"].(map[string]any)
	if tr["type"] != "prometheus" || tr["metricType"] != "AverageValue" || md["threshold"] != "70.5" || md["query"] != "vector(350)" || md["serverAddress"] != "http://127.0.0.1:9090" {
		t.Errorf("trigger %v", tr)
	}
	if _, ok := md["activationThreshold"]; ok {
		t.Errorf("activationThreshold set without being asked for: %v", md)
	}

	for name, bad := range map[string]ScaledObjectSpec{
		"no deployment":  {Namespace: "ns", Name: "so", MaxReplicas: 1, Prometheus: spec.Prometheus},
		"min above max":  {Namespace: "ns", Name: "so", Deployment: "app", MinReplicas: 3, MaxReplicas: 2, Prometheus: spec.Prometheus},
		"zero threshold": {Namespace: "ns", Name: "so", Deployment: "app", MaxReplicas: 2, Prometheus: PrometheusTrigger{ServerAddress: "x", Query: "q"}},
	} {
		if _, err := ScaledObject(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
