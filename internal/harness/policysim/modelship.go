package policysim

import (
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/metrics"
)

// Modelship is modelship's autoscaler: internal/autoscale.Decide on the spec, with its status
// carried from one decision to the next as the controller carries it in the ModelServer.
type Modelship struct {
	Label string
	Spec  v1alpha1.AutoscalingSpec
	prev  *v1alpha1.AutoscalingStatus
}

// Name is the label.
func (m *Modelship) Name() string { return m.Label }

// Interval is spec.autoscaling.interval (default 15s).
func (m *Modelship) Interval() time.Duration {
	if m.Spec.Interval.Duration > 0 {
		return m.Spec.Interval.Duration
	}
	return autoscale.DefaultInterval
}

// Decide runs Decide on the scrape.
func (m *Modelship) Decide(now time.Time, v View) int32 {
	var obs []autoscale.Observation
	for _, name := range autoscale.MetricNames(m.Spec.Metrics) {
		o := autoscale.Observation{Metric: name, Status: metrics.NoData, Message: "no pod scraped"}
		if v.Scraped > 0 {
			o.Status, o.Pods = metrics.OK, v.Scraped
			switch name {
			case autoscale.MetricGPUUtilization:
				o.Value = v.GPUUtilization
			case autoscale.MetricRequestsWaiting:
				o.Value = v.Waiting
			case autoscale.MetricKVCacheUsage:
				o.Value = v.KVCache * 100
			default:
				o.Status, o.Message = metrics.NoData, "not simulated"
			}
		}
		obs = append(obs, o)
	}
	out := autoscale.Decide(autoscale.Input{Spec: m.Spec, Current: v.Current, Ready: v.Ready,
		Starting: v.Current - v.Ready, Observations: obs, Previous: m.prev}, now)
	st := out.Status
	m.prev = &st
	return out.Desired
}
