package autoscale

import (
	"fmt"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Defaults, as HPA's (autoscaling/v2) where HPA has one.
const (
	// DefaultInterval is the evaluation interval.
	DefaultInterval = 15 * time.Second
	// DefaultTolerance is the relative distance from a target within which nothing changes.
	DefaultTolerance = 0.1
	// DefaultGPUUtilizationTarget is the GPU utilization target in percent.
	DefaultGPUUtilizationTarget = 70
	// DefaultScaleUpWindow is the scale-up stabilization window (none).
	DefaultScaleUpWindow = 0 * time.Second
	// DefaultScaleDownWindow is the scale-down stabilization window.
	DefaultScaleDownWindow = 300 * time.Second

	defaultPolicyPeriod     = 15 * time.Second
	defaultScaleUpPercent   = 100
	defaultScaleUpPods      = 4
	defaultScaleDownPercent = 100
	maxKeptEntries          = 100
)

// rules is one direction's scaling rules with defaults applied.
type rules struct {
	window   time.Duration
	selected v1alpha1.ScalingPolicySelect
	policies []policy
}

type policy struct {
	typ    v1alpha1.ScalingPolicyType
	value  int32
	period time.Duration
}

// settings is the spec with defaults applied.
type settings struct {
	min, max          int32
	interval          time.Duration
	tolerance         float64
	projectionHorizon time.Duration
	metrics           []v1alpha1.AutoscalingMetric
	names             []string
	slo               sloSpec
	hasSLO            bool
	up, down          rules
}

func resolve(spec v1alpha1.AutoscalingSpec) settings {
	s := settings{min: max(spec.Min(), 0), interval: spec.Interval.Duration, tolerance: DefaultTolerance}
	s.max = max(spec.MaxReplicas, s.min)
	if s.interval <= 0 {
		s.interval = DefaultInterval
	}
	if spec.Tolerance != nil && spec.Tolerance.AsApproximateFloat64() >= 0 {
		s.tolerance = spec.Tolerance.AsApproximateFloat64()
	}
	s.projectionHorizon = max(spec.ProjectionHorizon.Duration, 0)
	s.metrics = spec.Metrics
	s.slo, s.hasSLO = resolveSLO(spec.SLO)
	if len(s.metrics) == 0 && !s.hasSLO {
		s.metrics = []v1alpha1.AutoscalingMetric{{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: DefaultGPUUtilizationTarget}}}
	}
	s.names = MetricNames(s.metrics)
	s.up = resolveRules(spec.Behavior.ScaleUp, DefaultScaleUpWindow, []policy{
		{v1alpha1.PercentScalingPolicy, defaultScaleUpPercent, defaultPolicyPeriod},
		{v1alpha1.PodsScalingPolicy, defaultScaleUpPods, defaultPolicyPeriod},
	})
	s.down = resolveRules(spec.Behavior.ScaleDown, DefaultScaleDownWindow, []policy{
		{v1alpha1.PercentScalingPolicy, defaultScaleDownPercent, defaultPolicyPeriod},
	})
	return s
}

func resolveRules(r *v1alpha1.ScalingRules, window time.Duration, policies []policy) rules {
	out := rules{window: window, selected: v1alpha1.SelectMax, policies: policies}
	if r == nil {
		return out
	}
	if r.StabilizationWindow != nil && r.StabilizationWindow.Duration >= 0 {
		out.window = r.StabilizationWindow.Duration
	}
	if r.SelectPolicy != nil && *r.SelectPolicy != "" {
		out.selected = *r.SelectPolicy
	}
	if len(r.Policies) > 0 {
		out.policies = nil
		for _, p := range r.Policies {
			if p.Value <= 0 || p.Period.Duration <= 0 {
				continue // invalid; the CRD forbids it
			}
			out.policies = append(out.policies, policy{p.Type, p.Value, p.Period.Duration})
		}
		if len(out.policies) == 0 {
			out.policies = policies
		}
	}
	return out
}

// keepFor is how long recommendations and events matter: the longest window and period.
func (s settings) keepFor() (recs, events time.Duration) {
	recs = max(s.up.window, s.down.window)
	for _, p := range append(append([]policy(nil), s.up.policies...), s.down.policies...) {
		events = max(events, p.period)
	}
	return recs, events
}

// MetricName names one spec metric: gpuUtilization, requestsWaiting, kvCacheUsage, prometheus,
// resource/cpu, resource/memory, external/<metricName>, saturation, endpointPicker/<signal> or
// gateway; "" when no field is set.
func MetricName(m v1alpha1.AutoscalingMetric) string {
	switch {
	case m.GPUUtilization != nil:
		return MetricGPUUtilization
	case m.RequestsWaiting != nil:
		return MetricRequestsWaiting
	case m.KVCacheUsage != nil:
		return MetricKVCacheUsage
	case m.Prometheus != nil:
		return MetricPrometheus
	case m.Resource != nil:
		return "resource/" + string(m.Resource.Name)
	case m.External != nil:
		return "external/" + m.External.MetricName
	case m.Saturation != nil:
		return MetricSaturation
	case m.EndpointPicker != nil:
		return MetricEndpointPicker + "/" + string(m.EndpointPicker.Signal)
	case m.Gateway != nil:
		return MetricGateway
	}
	return ""
}

// MetricNames names each spec metric (in order) uniquely: MetricName, with "#2", "#3"... on
// repeats. The controller names the observations it makes for custom metrics with these.
func MetricNames(ms []v1alpha1.AutoscalingMetric) []string {
	seen := map[string]int{}
	out := make([]string, len(ms))
	for i, m := range ms {
		n := MetricName(m)
		seen[n]++
		if seen[n] > 1 {
			n = fmt.Sprintf("%s#%d", n, seen[n])
		}
		out[i] = n
	}
	return out
}

// kind says how a metric turns into a count.
type kind int

const (
	average   kind = iota // ratio rule over pods: ceil(pods * value/target)
	total                 // ceil(value / target)
	saturated             // saturation thresholds (proposeSaturation)
)

// target returns how a metric is judged: its kind and its target (average or per replica).
func target(m v1alpha1.AutoscalingMetric) (kind, float64) {
	switch {
	case m.GPUUtilization != nil:
		t := m.GPUUtilization.Target
		if t <= 0 {
			t = DefaultGPUUtilizationTarget
		}
		return average, float64(t)
	case m.RequestsWaiting != nil:
		return total, m.RequestsWaiting.Target.AsApproximateFloat64()
	case m.KVCacheUsage != nil:
		return average, m.KVCacheUsage.Target.AsApproximateFloat64()
	case m.Prometheus != nil:
		return total, m.Prometheus.Target.AsApproximateFloat64()
	case m.Resource != nil:
		return average, float64(m.Resource.Target)
	case m.External != nil:
		return total, m.External.Target.AsApproximateFloat64()
	case m.Saturation != nil:
		return saturated, resolveSaturation(m.Saturation).kv
	case m.EndpointPicker != nil:
		if m.EndpointPicker.Signal == v1alpha1.EndpointPickerRunningRequests {
			return total, m.EndpointPicker.Target.AsApproximateFloat64()
		}
		return average, m.EndpointPicker.Target.AsApproximateFloat64()
	case m.Gateway != nil:
		return total, m.Gateway.Target.AsApproximateFloat64()
	}
	return average, 0
}
