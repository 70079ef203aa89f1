package policysim

import (
	"fmt"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The saturation policy reads each serving pod's KV-cache and queue through the controller's
// grouped signal code: a fleet whose pods are all saturated grows by one per saturated pod, an
// idle one shrinks (no scale-down window here), and a fleet without pods' series holds.
func TestModelshipSaturationReadsEachPod(t *testing.T) {
	spec := v1alpha1.AutoscalingSpec{MinReplicas: 1, MaxReplicas: 20,
		Metrics:  []v1alpha1.AutoscalingMetric{{Saturation: &v1alpha1.SaturationMetric{}}},
		Behavior: v1alpha1.ScalingBehavior{ScaleDown: &v1alpha1.ScalingRules{StabilizationWindow: &v1alpha1.Duration{}}}}
	pods := func(n int, kv, waiting float64) []PodSignals {
		var out []PodSignals
		for i := range n {
			out = append(out, PodSignals{Name: fmt.Sprintf("p%d", i), KVCacheUsage: kv, Waiting: waiting})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		perPod []PodSignals
		want   int32
	}{
		{"all four saturated", pods(4, 0.95, 0), 8},
		{"queues at the threshold", pods(4, 0.1, 6), 8},
		{"idle: one replica fewer", pods(4, 0.05, 0), 3},
		{"no series", nil, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Modelship{Label: "modelship-saturation", Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Spec: spec}
			got := m.Decide(Signals{Now: time.Minute, Pods: 4, Ready: int32(len(tc.perPod)), PerPod: tc.perPod, HasGPU: true})
			if got != tc.want {
				t.Errorf("Decide = %d, want %d", got, tc.want)
			}
		})
	}
}
