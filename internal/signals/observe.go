package signals

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	externalv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/window"
)

// Observations of the custom metrics, built by the controller from what it fetched (the hook
// for spec metrics the snapshot does not cover). Name them with MetricNames.

// FromSample turns the outcome of a custom prometheus metric's query (rendered by the
// controller for one ModelServer, returning its total load) into an observation.
func FromSample(metric string, s metrics.Sample) autoscale.Observation {
	if s.Status != metrics.OK {
		return autoscale.Observation{Metric: metric, Status: s.Status, Message: s.Message}
	}
	return autoscale.Observation{Metric: metric, Status: metrics.OK, Value: s.Value}
}

// TrendWindow is the range over which a total metric's trend is measured for spec.autoscaling.projectionHorizon,
// sampled every TrendStep.
const (
	TrendWindow = 5 * time.Minute
	TrendStep   = 30 * time.Second
)

// TrendMinSpan is how much of TrendWindow the load must have been measured over before its
// trend counts: a deriv over the first two or three samples of a series that just appeared (a
// new ModelServer, traffic just moved to it, the controller's Prometheus just started) is the
// ramp of the rate window filling, and projected over a cold start of minutes it asks for the
// maximum.
const TrendMinSpan = TrendWindow / 2

// TrendQuery is the PromQL for the trend of a rendered total-load query whose rates are taken
// over win (the serving window): deriv over TrendWindow of a subquery sampled every TrendStep,
// in units per second, and nothing (no projection) until the subquery has samples spanning
// TrendMinSpan. A sample counts only once the load has been above zero over the whole window
// before it (at each of window.ScrapesPerWindow steps of win): a rate over a window that
// traffic has not filled yet (a ModelServer whose traffic just started, a fleet back from
// zero or from idle) reads a flat load as a ramp (measured in Prometheus's engine: a steady
// 10/s on a new series read as rising 0.024/s three minutes on, 43% more load projected over
// a 3-minute cold start).
func TrendQuery(q string, win time.Duration) string {
	full := fmt.Sprintf("(%s) and on() (%s)", q, FilledQuery(q, win))
	sub := fmt.Sprintf("(%s)[%s:%s]", full, metrics.PromDuration(TrendWindow), metrics.PromDuration(TrendStep))
	return fmt.Sprintf("deriv(%s) and on() (count_over_time(%s) >= %d)", sub, sub, int(TrendMinSpan/TrendStep)+1)
}

// FilledQuery is the PromQL that answers (with a count) only when a rendered total-load query
// whose rates are taken over win (the serving window) has been above zero at each of
// window.ScrapesPerWindow steps of the window before now: the traffic has filled the rates'
// window. Until then a rate reads the traffic's start, not its level (Prometheus extrapolates a
// new counter to zero at its first sample: a quarter of a steady load 15 s after it starts).
func FilledQuery(q string, win time.Duration) string {
	step := max(win/window.ScrapesPerWindow, time.Second)
	return fmt.Sprintf("count_over_time(((%s) > 0)[%s:%s]) >= %d", q, metrics.PromDuration(win), metrics.PromDuration(step), window.ScrapesPerWindow)
}

// WithFilling marks an observation whose FilledQuery had no answer as Filling: nothing is learnt
// from it. An error counts as no answer.
func WithFilling(o autoscale.Observation, s metrics.Sample) autoscale.Observation {
	o.Filling = s.Status != metrics.OK
	return o
}

// WithTrend attaches the outcome of TrendQuery to an observation; a trend without data leaves
// the observation without one (no projection), never a zero trend.
func WithTrend(o autoscale.Observation, s metrics.Sample) autoscale.Observation {
	if o.Status == metrics.OK && s.Status == metrics.OK && !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) {
		o.Trend, o.HasTrend = s.Value, true
	}
	return o
}

// ResourceObservation is a resource metric's average utilization, in percent of the requests,
// over the Ready pods from the resource metrics API (HPA's rule: total usage over total
// requests of the pods that have usage). Usage of pods not in ready (deleted, other
// workloads, not Ready) is ignored; Ready pods without usage are MissingPods. A Ready pod
// without a request for the resource makes the metric unusable, as in HPA.
func ResourceObservation(metric string, res corev1.ResourceName, ready []corev1.Pod, usage []metricsv1beta1.PodMetrics) autoscale.Observation {
	o := autoscale.Observation{Metric: metric}
	if len(ready) == 0 {
		o.Status, o.Message = metrics.NoData, "no Ready pods"
		return o
	}
	byPod := make(map[autoscale.PodKey]*metricsv1beta1.PodMetrics, len(usage))
	for i := range usage {
		byPod[autoscale.PodKey{Namespace: usage[i].Namespace, Name: usage[i].Name}] = &usage[i]
	}
	var used, requested int64
	for i := range ready {
		p := &ready[i]
		var req int64
		for _, c := range p.Spec.Containers {
			q, ok := c.Resources.Requests[res]
			if !ok {
				o.Status, o.Message = metrics.Error, fmt.Sprintf("pod %s has no %s request in container %s", p.Name, res, c.Name)
				return o
			}
			req += q.MilliValue()
		}
		pm, ok := byPod[autoscale.PodKey{Namespace: p.Namespace, Name: p.Name}]
		if !ok {
			o.MissingPods++
			continue
		}
		for _, c := range pm.Containers {
			if q, ok := c.Usage[res]; ok {
				used += q.MilliValue()
			}
		}
		requested += req
		o.Pods++
	}
	if o.Pods == 0 || requested == 0 {
		o.Status, o.Message, o.MissingPods = metrics.NoData, fmt.Sprintf("no %s usage for any of %d Ready pods", res, len(ready)), 0
		return o
	}
	o.Status, o.Value = metrics.OK, 100*float64(used)/float64(requested)
	return o
}

// ExternalObservation is an external metric's total: the sum of the values the external
// metrics API returned for the metric and selector. An error is metrics.Error, an empty list
// NoData (never zero).
func ExternalObservation(metric string, list *externalv1beta1.ExternalMetricValueList, err error) autoscale.Observation {
	o := autoscale.Observation{Metric: metric}
	switch {
	case err != nil:
		o.Status, o.Message = metrics.Error, fmt.Errorf("external metrics API: %w", err).Error()
	case list == nil || len(list.Items) == 0:
		o.Status, o.Message = metrics.NoData, "the external metrics API returned no value"
	default:
		o.Status = metrics.OK
		for _, it := range list.Items {
			o.Value += it.Value.AsApproximateFloat64()
		}
	}
	return o
}
