package autoscale

import (
	"fmt"
	"math"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
)

// Saturation-based scaling, after llm-d's workload variant autoscaler: a replica is saturated
// when its KV-cache use or its queue reaches a threshold; the replicas that are not saturated
// must keep, on average, some spare room below the thresholds (the triggers).
//
// The proposal (proposeSaturation):
//   - scale up when every measured replica is saturated, or when the replicas that are not
//     have on average less spare room than a trigger: one replica more than are measured, plus
//     one per saturated replica beyond the first (a burst that saturates several replicas
//     asks for as many);
//   - scale down only when no replica is saturated and none is missing a sample, by one
//     replica, when the measured load spread over one replica fewer still keeps the triggers'
//     room (llm-d's scale-down simulation);
//   - else hold. The triggers give the hysteresis, so the tolerance does not apply.
//
// As for the other metrics, a proposal above the Ready replicas but not above Current is
// Current: replicas still loading their model will take that load (no cascade).

// Saturation defaults (llm-d's published thresholds).
const (
	DefaultKVCacheThresholdPercent = 80
	DefaultQueueLengthThreshold    = 5
	DefaultKVSpareTriggerPercent   = 10
	DefaultQueueSpareTrigger       = 3
)

// saturationSettings are a saturation metric's thresholds with defaults applied; KV-cache as
// fractions.
type saturationSettings struct {
	kv, queue           float64
	kvSpare, queueSpare float64
}

func resolveSaturation(m *v1alpha1.SaturationMetric) saturationSettings {
	s := saturationSettings{kv: DefaultKVCacheThresholdPercent / 100.0, queue: DefaultQueueLengthThreshold,
		kvSpare: DefaultKVSpareTriggerPercent / 100.0, queueSpare: DefaultQueueSpareTrigger}
	if m == nil {
		return s
	}
	if m.KVCacheThresholdPercent > 0 && m.KVCacheThresholdPercent <= 100 {
		s.kv = float64(m.KVCacheThresholdPercent) / 100
	}
	if m.QueueLengthThreshold > 0 {
		s.queue = float64(m.QueueLengthThreshold)
	}
	if p := m.KVSpareTriggerPercent; p != nil && *p >= 0 {
		s.kvSpare = float64(*p) / 100
	}
	if p := m.QueueSpareTrigger; p != nil && *p >= 0 {
		s.queueSpare = float64(*p)
	}
	// The CRD keeps a trigger below its threshold; an object stored before that rule (or
	// built without the API server) falls back to the defaults' proportions.
	if s.kvSpare >= s.kv {
		s.kvSpare = s.kv * DefaultKVSpareTriggerPercent / DefaultKVCacheThresholdPercent
	}
	if s.queueSpare >= s.queue {
		s.queueSpare = s.queue * DefaultQueueSpareTrigger / DefaultQueueLengthThreshold
	}
	return s
}

func (s saturationSettings) String() string {
	return fmt.Sprintf("KV-cache %s%% or queue %s (spare %s%%, %s)", fmtNum(s.kv*100), fmtNum(s.queue), fmtNum(s.kvSpare*100), fmtNum(s.queueSpare))
}

// SaturationSample is what a saturation metric measured over the Ready pods that reported both
// their KV-cache use and their queue.
type SaturationSample struct {
	// Pods is the number of pods measured; Saturated of them are saturated.
	Pods, Saturated int32
	// KVCache and Queue are the totals over the measured pods (KV-cache as a fraction per pod).
	KVCache, Queue float64
	// SpareKVCache and SpareQueue are the average room below the thresholds of the pods that
	// are not saturated (0 when all are).
	SpareKVCache, SpareQueue float64
}

// observeSaturation reads each Ready pod's KV-cache use and queue; a pod lacking either is
// missing.
func (s *Snapshot) observeSaturation(name string, st saturationSettings, ready []PodKey) Observation {
	kv, bad := s.usable(name, MetricKVCacheUsage)
	if bad != nil {
		return *bad
	}
	q, bad := s.usable(name, MetricRequestsWaiting)
	if bad != nil {
		return *bad
	}
	if len(ready) == 0 {
		return Observation{Metric: name, Status: sample.NoData, Message: "no Ready pods"}
	}
	var ss SaturationSample
	var free int32
	for _, p := range ready {
		k, ok1 := kv.byPod[p]
		w, ok2 := q.byPod[p]
		if !ok1 || !ok2 {
			continue
		}
		ss.Pods++
		ss.KVCache += k
		ss.Queue += w
		if k >= st.kv || w >= st.queue {
			ss.Saturated++
			continue
		}
		free++
		ss.SpareKVCache += st.kv - k
		ss.SpareQueue += st.queue - w
	}
	if ss.Pods == 0 {
		return Observation{Metric: name, Status: sample.NoData, Message: fmt.Sprintf("no KV-cache and queue series for any of %d Ready pods", len(ready))}
	}
	if free > 0 {
		ss.SpareKVCache /= float64(free)
		ss.SpareQueue /= float64(free)
	}
	return Observation{Metric: name, Status: sample.OK, Value: float64(ss.Saturated), Pods: ss.Pods,
		MissingPods: int32(len(ready)) - ss.Pods, Saturation: &ss}
}

// proposeSaturation is a saturation metric's proposal (see the rules at the top of the file).
func proposeSaturation(st saturationSettings, o Observation, cur int32) (int32, string) {
	x := o.Saturation
	free := x.Pods - x.Saturated
	up := ""
	switch {
	case free == 0:
		up = fmt.Sprintf("all %d measured replicas saturated (%s)", x.Pods, st)
	case x.SpareKVCache < st.kvSpare:
		up = fmt.Sprintf("%d of %d replicas saturated; spare KV-cache %s%% < %s%%", x.Saturated, x.Pods, fmtNum(x.SpareKVCache*100), fmtNum(st.kvSpare*100))
	case x.SpareQueue < st.queueSpare:
		up = fmt.Sprintf("%d of %d replicas saturated; spare queue %s < %s", x.Saturated, x.Pods, fmtNum(x.SpareQueue), fmtNum(st.queueSpare))
	}
	if up != "" {
		n := x.Pods + max(1, x.Saturated)
		if n <= cur {
			return cur, up + fmt.Sprintf("; the %d replicas not measured yet will take that load", cur-x.Pods)
		}
		return n, up
	}
	if x.Saturated > 0 || o.MissingPods > 0 {
		return cur, fmt.Sprintf("%d of %d replicas saturated, %d without samples: holding", x.Saturated, x.Pods, o.MissingPods)
	}
	// llm-d's scale-down simulation: one replica fewer, the load spread over the others, must
	// still leave the triggers' room. One at a time: KV-cache and queues say nothing of the
	// compute a replica spends, so a fleet idle by these signals may still be busy.
	n := x.Pods - 1
	if n < 1 || n >= cur || x.KVCache/float64(n) > st.kv-st.kvSpare || x.Queue/float64(n) > st.queue-st.queueSpare {
		return cur, fmt.Sprintf("no replica saturated; spare KV-cache %s%%, queue %s", fmtNum(x.SpareKVCache*100), fmtNum(x.SpareQueue))
	}
	return n, fmt.Sprintf("no replica saturated; %d replicas keep the spare room for KV-cache %s and queue %s", n, fmtNum(x.KVCache), fmtNum(x.Queue))
}

// observeEndpointPicker reads one endpoint picker metric for the ModelServer's pools: the pool
// averages (queue size, saturation) weighted by each pool's Ready pods, or an objective's
// running requests.
func (s *Snapshot) observeEndpointPicker(name string, m *v1alpha1.EndpointPickerMetric, pools []Pool) Observation {
	if len(pools) == 0 {
		return Observation{Metric: name, Status: sample.NoData, Message: "no InferencePools (spec.gateway.backend is not InferencePool)"}
	}
	key := SignalPoolQueueSize
	switch m.Signal {
	case v1alpha1.EndpointPickerPoolSaturation:
		key = SignalPoolSaturation
	case v1alpha1.EndpointPickerRunningRequests:
		key = SignalObjectiveRunning
	}
	d, bad := s.usable(name, key)
	if bad != nil {
		return *bad
	}
	if m.Signal == v1alpha1.EndpointPickerRunningRequests {
		v, ok := d.byPod[PodKey{Namespace: pools[0].Key.Namespace, Name: m.Objective}]
		if !ok {
			return Observation{Metric: name, Status: sample.NoData, Message: fmt.Sprintf("no running requests series for model_name %q in namespace %s", m.Objective, pools[0].Key.Namespace)}
		}
		return Observation{Metric: name, Status: sample.OK, Value: v}
	}
	var sum float64
	var pods, missing int32
	var absent []string
	for _, p := range pools {
		v, ok := d.byPod[p.Key]
		if !ok {
			missing += p.Ready
			absent = append(absent, p.Key.Name)
			continue
		}
		if p.Ready > 0 {
			sum += v * float64(p.Ready)
			pods += p.Ready
		}
	}
	if pods == 0 {
		if len(absent) == len(pools) {
			return Observation{Metric: name, Status: sample.NoData, Message: fmt.Sprintf("no endpoint picker series for pools %v", absent)}
		}
		return Observation{Metric: name, Status: sample.NoData, Message: "no Ready pods in the pools"}
	}
	if math.IsNaN(sum) {
		return Observation{Metric: name, Status: sample.NoData, Message: "no value"}
	}
	return Observation{Metric: name, Status: sample.OK, Value: sum / float64(pods), Pods: pods, MissingPods: missing}
}
