package policysim

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// RecipeSpec is modelship's SLO-minded recipe in today's API: the token work rate (prompt
// tokens over the prefill rate plus generated tokens over the decode rate, a prometheus metric)
// per replica, and the queue as a backstop (waiting 0: none), with the load projected horizon
// (the fleet's cold start) ahead. make bench-sim and make
// bench-peers both run it.
func RecipeSpec(lo, hi int32, horizon time.Duration, work float64, waiting int64, down, up time.Duration, tol float64) v1alpha1.AutoscalingSpec {
	spec := v1alpha1.AutoscalingSpec{
		MinReplicas: ptr.To(int32(lo)), MaxReplicas: hi, ProjectionHorizon: v1alpha1.Duration{Duration: horizon},
		Metrics: []v1alpha1.AutoscalingMetric{
			{Prometheus: &v1alpha1.PrometheusMetric{
				Query:  WorkQuery,
				Target: *resource.NewMilliQuantity(int64(math.Round(work*1000)), resource.DecimalSI),
			}},
		},
		Behavior: v1alpha1.ScalingBehavior{
			ScaleDown: &v1alpha1.ScalingRules{StabilizationWindow: &v1alpha1.Duration{Duration: down}},
			ScaleUp:   &v1alpha1.ScalingRules{StabilizationWindow: &v1alpha1.Duration{Duration: up}},
		},
		Tolerance: resource.NewMilliQuantity(int64(math.Round(tol*1000)), resource.DecimalSI),
	}
	if waiting > 0 {
		spec.Metrics = append(spec.Metrics, v1alpha1.AutoscalingMetric{RequestsWaiting: &v1alpha1.PerReplicaMetric{Target: *resource.NewQuantity(waiting, resource.DecimalSI)}})
	}
	return spec
}

// WorkQuery is fleet.Capacity.Work in PromQL for the default capacity: the larger of
// prefill/0.5 and prefill+decode, in replicas' worth of time.
const WorkQuery = `(sum(rate(vllm:prompt_tokens_total{namespace="{{.Namespace}}"}[1m]))/8000 > ` +
	`(sum(rate(vllm:prompt_tokens_total{namespace="{{.Namespace}}"}[1m]))/16000 + sum(rate(vllm:generation_tokens_total{namespace="{{.Namespace}}"}[1m]))/3000)) or ` +
	`(sum(rate(vllm:prompt_tokens_total{namespace="{{.Namespace}}"}[1m]))/16000 + sum(rate(vllm:generation_tokens_total{namespace="{{.Namespace}}"}[1m]))/3000)`

// SLOSpec is modelship's SLO-first autoscaling: the latency SLO and nothing to tune, with the
// load projected horizon (the fleet's cold start) ahead and the scale-down window down.
func SLOSpec(lo, hi int32, ttft, itl, horizon, down time.Duration) v1alpha1.AutoscalingSpec {
	return v1alpha1.AutoscalingSpec{
		MinReplicas: ptr.To(int32(lo)), MaxReplicas: hi, ProjectionHorizon: v1alpha1.Duration{Duration: horizon},
		SLO: &v1alpha1.LatencySLO{TTFTP95: &v1alpha1.Duration{Duration: ttft}, ITLP95: &v1alpha1.Duration{Duration: itl}},
		Behavior: v1alpha1.ScalingBehavior{
			ScaleDown: &v1alpha1.ScalingRules{StabilizationWindow: &v1alpha1.Duration{Duration: down}},
		},
	}
}
