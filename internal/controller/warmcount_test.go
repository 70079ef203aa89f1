package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
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
// its weight at no more than the stable pods' load, so the probe reports how many are warm, not
// only whether all are.
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
		if got := probeAll(context.Background(), l, pods, 8000, "/v1/models", logr.Discard()); got != warm {
			t.Errorf("%d of %d pods warm: probeAll = %d", warm, len(pods), got)
		}
	}
}
