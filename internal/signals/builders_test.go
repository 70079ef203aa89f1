package signals

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Builders of autoscaling specs for the tests that fetch signals and decide on them (the same
// as package autoscale's).

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type specOpt func(*v1alpha1.AutoscalingSpec)

func newSpec(minR, maxR int32, opts ...specOpt) v1alpha1.AutoscalingSpec {
	s := v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(minR)), MaxReplicas: maxR}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func withGPU(target int32) specOpt {
	return func(s *v1alpha1.AutoscalingSpec) {
		s.Metrics = append(s.Metrics, v1alpha1.AutoscalingMetric{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: target}})
	}
}

func withWaiting(perReplica int64) specOpt {
	return func(s *v1alpha1.AutoscalingSpec) {
		s.Metrics = append(s.Metrics, v1alpha1.AutoscalingMetric{RequestsWaiting: &v1alpha1.PerReplicaMetric{Target: *resource.NewQuantity(perReplica, resource.DecimalSI)}})
	}
}

func withKV(target string) specOpt {
	return func(s *v1alpha1.AutoscalingSpec) {
		s.Metrics = append(s.Metrics, v1alpha1.AutoscalingMetric{KVCacheUsage: &v1alpha1.AverageMetric{Target: resource.MustParse(target)}})
	}
}

// noWindow is a scale-down without a stabilization window.
var noWindow specOpt = func(s *v1alpha1.AutoscalingSpec) {
	s.Behavior.ScaleDown = &v1alpha1.ScalingRules{StabilizationWindow: &v1alpha1.Duration{Duration: 0}}
}
