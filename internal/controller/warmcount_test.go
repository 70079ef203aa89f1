package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// loadingProber answers warm for the pods in warm and fails the others (model still loading).
type loadingProber map[string]bool

func (l loadingProber) Probe(_ context.Context, pod *corev1.Pod, _ int32, _ string) error {
	if l[pod.Name] {
		return nil
	}
	return errors.New("503: model loading")
}

// TestProbeAllCountsTheWarmPods: the rollout measures a step as soon as its warm pods carry
// its weight at no more than the stable pods' load, and each warm pod's gate opens, so the
// probes say which pods are warm, not only whether all are.
func TestProbeAllCountsTheWarmPods(t *testing.T) {
	var pods []corev1.Pod
	for i := range 12 {
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: fmt.Sprintf("p%d", i)}})
	}
	for _, warm := range []int{0, 1, 5, 12} {
		l := loadingProber{}
		for i := range warm {
			l[fmt.Sprintf("p%d", i)] = true
		}
		probe := func(ctx context.Context, p *corev1.Pod) error { return l.Probe(ctx, p, 8000, "/v1/models") }
		got := 0
		for i, ok := range probeAll(context.Background(), probe, pods) {
			if ok != l[pods[i].Name] {
				t.Errorf("%d of %d pods warm: pod %s passed %t", warm, len(pods), pods[i].Name, ok)
			}
			if ok {
				got++
			}
		}
		if got != warm {
			t.Errorf("%d of %d pods warm: probeAll passed %d", warm, len(pods), got)
		}
	}
}
