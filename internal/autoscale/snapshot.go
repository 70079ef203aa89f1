package autoscale

import (
	"errors"
	"fmt"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
)

// The built-in signals at one instant, for all pods: package signals fetches them (one grouped
// query per signal for every ModelServer) and Observe maps them onto one ModelServer's Ready
// pods in memory.

// PodKey names a pod.
type PodKey struct {
	Namespace string
	Name      string
}

// SignalValues is one built-in signal's values by pod (or pool, or model name), or the error
// of its query.
type SignalValues struct {
	Err   error
	ByPod map[PodKey]float64
}

// signalData is one signal's per-pod values, or why there are none.
type signalData struct {
	queried bool
	err     error
	byPod   map[PodKey]float64
}

// Snapshot is the built-in signals for all pods at one instant.
type Snapshot struct {
	// At is when the queries ran.
	At      time.Time
	signals map[string]signalData
}

// NewSnapshot is the built-in signals at at, by signal (MetricGPUUtilization,
// MetricRequestsWaiting, MetricKVCacheUsage, SignalPoolQueueSize, SignalPoolSaturation,
// SignalObjectiveRunning); a signal not in values was not queried.
func NewSnapshot(at time.Time, values map[string]SignalValues) *Snapshot {
	s := &Snapshot{At: at, signals: make(map[string]signalData, len(values))}
	for k, v := range values {
		s.signals[k] = signalData{queried: true, err: v.Err, byPod: v.ByPod}
	}
	return s
}

// Pool is one of a ModelServer's InferencePools (spec.gateway.backend InferencePool) and the
// number of its Ready pods, the weight of its endpoint picker's averages.
type Pool struct {
	// Key is the pool's namespace and name.
	Key PodKey
	// Ready is the number of Ready pods the pool selects.
	Ready int32
}

// Observe maps the snapshot onto one ModelServer: for each built-in metric of spec (the
// default gpuUtilization when spec has none), an Observation over the given Ready pods (and,
// for endpointPicker metrics, its InferencePools). Series of other pods, deleted pods or pods
// not Ready are not looked at. Custom metrics (prometheus, resource, external) are not in the
// snapshot; the controller measures them and appends their observations, named with
// MetricNames.
func (s *Snapshot) Observe(spec v1alpha1.AutoscalingSpec, ready []PodKey, pools ...Pool) []Observation {
	ms := spec.Metrics
	if len(ms) == 0 {
		ms = []v1alpha1.AutoscalingMetric{{GPUUtilization: &v1alpha1.GPUUtilizationMetric{}}}
	}
	names := MetricNames(ms)
	var out []Observation
	for i, m := range ms {
		var key string
		switch {
		case m.GPUUtilization != nil:
			key = MetricGPUUtilization
		case m.RequestsWaiting != nil:
			key = MetricRequestsWaiting
		case m.KVCacheUsage != nil:
			key = MetricKVCacheUsage
		case m.Saturation != nil:
			out = append(out, s.observeSaturation(names[i], resolveSaturation(m.Saturation), ready))
			continue
		case m.EndpointPicker != nil:
			out = append(out, s.observeEndpointPicker(names[i], m.EndpointPicker, pools))
			continue
		default:
			continue
		}
		k, _ := target(m)
		out = append(out, s.observe(names[i], key, k, ready))
	}
	return out
}

// RequestsWaiting is the total of the requests queued in the Ready pods, for Input.RequestsWaiting.
func (s *Snapshot) RequestsWaiting(ready []PodKey) Observation {
	return s.observe(MetricRequestsWaiting, MetricRequestsWaiting, total, ready)
}

// RequestsRunning is the total of the requests running in the Ready pods' engines, for
// Input.RequestsRunning.
func (s *Snapshot) RequestsRunning(ready []PodKey) Observation {
	return s.observe(SignalRequestsRunning, SignalRequestsRunning, total, ready)
}

// KVCacheUsage is the KV-cache use averaged over the Ready pods, for Input.KVCacheUsage.
func (s *Snapshot) KVCacheUsage(ready []PodKey) Observation {
	return s.observe(MetricKVCacheUsage, MetricKVCacheUsage, average, ready)
}

// usable returns a signal's data, or an observation saying why there is none: NoData for a
// signal not queried or answered with partial data, Error for a failed query.
func (s *Snapshot) usable(name, key string) (signalData, *Observation) {
	d := s.signals[key]
	switch {
	case !d.queried:
		return d, &Observation{Metric: name, Status: sample.NoData, Message: "signal not queried"}
	case errors.Is(d.err, sample.ErrPartialData):
		// Part of the pods' series is no data: their average or total would be read low.
		return d, &Observation{Metric: name, Status: sample.NoData, Message: d.err.Error()}
	case d.err != nil:
		return d, &Observation{Metric: name, Status: sample.Error, Message: d.err.Error()}
	}
	return d, nil
}

func (s *Snapshot) observe(name, key string, k kind, ready []PodKey) Observation {
	o := Observation{Metric: name}
	d, bad := s.usable(name, key)
	switch {
	case bad != nil:
		return *bad
	case len(ready) == 0:
		o.Status, o.Message = sample.NoData, "no Ready pods"
		return o
	}
	var sum float64
	var n int32
	for _, p := range ready {
		if v, ok := d.byPod[p]; ok {
			sum += v
			n++
		}
	}
	if n == 0 {
		o.Status, o.Message = sample.NoData, fmt.Sprintf("no series for any of %d Ready pods", len(ready))
		return o
	}
	o.Status, o.Pods, o.MissingPods = sample.OK, n, int32(len(ready))-n
	o.Value = sum
	if k == average {
		o.Value = sum / float64(n)
	}
	return o
}
