package manager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

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
