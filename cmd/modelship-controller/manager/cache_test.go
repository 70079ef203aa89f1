package manager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/workload"
)

// TestTheCachedPodKeepsItsWarmupGate: the pod cache trims pods, and the warm-up opens only the
// gate of a pod it sees gated; a trimmed pod without its readiness gates was never opened, so
// no gated pod ever became Ready (seen in make e2e).
func TestTheCachedPodKeepsItsWarmupGate(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.10.2"}},
		ReadinessGates: []corev1.PodReadinessGate{{ConditionType: v1alpha1.PodConditionWarm}},
	}}
	out, err := trimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*corev1.Pod)
	if !workload.WarmGated(&trimmed.Spec) {
		t.Errorf("the cached pod lost its warm-up readiness gate: %+v", trimmed.Spec.ReadinessGates)
	}
	if len(trimmed.Spec.Containers) != 1 || trimmed.Spec.Containers[0].Image != "" {
		t.Errorf("containers %+v, want the name and resources only", trimmed.Spec.Containers)
	}
}

func TestTheCacheHoldsOnlyTheEndpointSlicesOfModelshipServices(t *testing.T) {
	var sel labels.Selector
	for obj, by := range CacheOptions().ByObject {
		if _, ok := obj.(*discoveryv1.EndpointSlice); ok {
			sel = by.Label
		}
	}
	if sel == nil {
		t.Fatal("no cache filter for EndpointSlices: every slice of the cluster would be cached")
	}
	ours := labels.Set{v1alpha1.LabelModelServer: "llama", discoveryv1.LabelServiceName: "llama-blue"}
	theirs := labels.Set{discoveryv1.LabelServiceName: "kube-dns"}
	if !sel.Matches(ours) || sel.Matches(theirs) {
		t.Errorf("selector %s: matches ours %t (want true), another Service's %t (want false)", sel, sel.Matches(ours), sel.Matches(theirs))
	}
}
