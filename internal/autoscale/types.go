// Package autoscale decides the total replica count of a ModelServer (both colors together) from
// GPU and serving signals, with the HorizontalPodAutoscaler's rules: each metric proposes a
// count, the largest wins, a tolerance around each target, stabilization windows and rate-limit
// policies per direction, min/max bounds. On top of HPA it holds on missing data (an outage never
// reads as zero load), does not cascade scale-ups while new pods load their model, and clamps to
// the GPUs the cluster and the namespace quota can still give (package capacity).
//
// Decide is pure and takes the clock as a parameter. Its memory (recent recommendations and
// scale events) lives in v1alpha1.AutoscalingStatus, so a controller restart does not forget the
// windows. Gathering is at the edge, in package signals: it runs one PromQL query per built-in
// signal for all ModelServers into a Snapshot, which Snapshot.Observe maps onto one
// ModelServer's Ready pods in memory. This package has no client.
package autoscale

import (
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/capacity"
	"github.com/modelship/modelship/internal/sample"
)

// Event reasons of the autoscaler (UpperCamelCase, recorded on the ModelServer).
const (
	// ReasonScaledUp: the total replica count went up.
	ReasonScaledUp = "ScaledUp"
	// ReasonScaledDown: the total replica count went down.
	ReasonScaledDown = "ScaledDown"
)

// Metric names used in proposals, observations and messages. Custom metrics are named
// "prometheus", "resource/cpu", "resource/memory" and "external/<metricName>"; a name that
// repeats in the spec gets a "#2", "#3"... suffix (see MetricNames).
const (
	// MetricGPUUtilization names the gpuUtilization metric.
	MetricGPUUtilization = "gpuUtilization"
	// MetricRequestsWaiting names the requestsWaiting metric.
	MetricRequestsWaiting = "requestsWaiting"
	// MetricKVCacheUsage names the kvCacheUsage metric.
	MetricKVCacheUsage = "kvCacheUsage"
	// MetricPrometheus names the (first) custom prometheus metric.
	MetricPrometheus = "prometheus"
	// MetricSaturation names the saturation metric.
	MetricSaturation = "saturation"
	// MetricEndpointPicker prefixes the endpointPicker metrics: endpointPicker/QueueSize,
	// endpointPicker/PoolSaturation, endpointPicker/RunningRequests.
	MetricEndpointPicker = "endpointPicker"
	// MetricGateway names the gateway metric: the request rate at the route.
	MetricGateway = "gateway"
)

// Keys of the endpoint picker's signals in a Snapshot.
const (
	// SignalPoolQueueSize is each InferencePool's average queue per pod.
	SignalPoolQueueSize = "poolQueueSize"
	// SignalPoolSaturation is each InferencePool's saturation, 0..1.
	SignalPoolSaturation = "poolSaturation"
	// SignalObjectiveRunning is each model name's running requests.
	SignalObjectiveRunning = "objectiveRunning"
	// SignalRequestsRunning is each pod's requests running in its engine.
	SignalRequestsRunning = "requestsRunning"
)

// Observation is one metric's measured value for one ModelServer.
//
// For an average metric (gpuUtilization, kvCacheUsage, resource) Value is the average over the
// Ready pods that have a sample (Pods of them); MissingPods are Ready pods without one. For a
// total metric (requestsWaiting, prometheus, external) Value is the total load; MissingPods are
// Ready pods that did not report into the total (requestsWaiting only).
//
// The target is not carried here: Decide reads it from the spec, the single source of truth.
type Observation struct {
	// Metric is the name from MetricNames.
	Metric string
	// Status says whether Value is usable; NoData and Error give no proposal.
	Status sample.Status
	// Value is meaningful only when Status is sample.OK.
	Value float64
	// Pods is the number of pods the value was measured on (averages; 0 = use Input.Ready).
	Pods int32
	// MissingPods is the number of Ready pods without a sample.
	MissingPods int32
	// Message says why there is no value.
	Message string
	// Trend is the value's change per second over the last minutes (PromQL deriv), for total
	// metrics; with spec.autoscaling.projectionHorizon set, a rising total proposes for Value + Trend *
	// projectionHorizon.
	// HasTrend is false when it was not measured.
	Trend    float64
	HasTrend bool
	// Filling is true for a total metric whose rates are taken over a window the load has not
	// been above zero throughout yet (traffic that just started, a fleet back from idle): the
	// rate reads the traffic's start, low, and spec.autoscaling.slo learns nothing from it.
	// False when the source does not tell.
	Filling bool
	// Saturation is the saturation metric's measurement (Value is then the saturated count).
	Saturation *SaturationSample
}

// Input is everything Decide needs besides the clock.
type Input struct {
	// Spec is the autoscaling spec; Decide applies its defaults itself.
	Spec v1alpha1.AutoscalingSpec
	// Current is the total replica count now asked for (both colors' spec.replicas).
	Current int32
	// Ready is the number of Ready pods across both colors.
	Ready int32
	// ReadyOverWindow is the Ready pods averaged over the serving window the load and the
	// latencies are read over, each counted from when it came Ready (0: unknown, Ready is
	// taken): pods come Ready within it served part of it only.
	ReadyOverWindow float64
	// Starting is the number of pods that exist but are not Ready yet (scheduling, pulling,
	// loading the model). Informational: Decide derives cold-start behaviour from Current and
	// Ready.
	Starting int32
	// Observations are the metrics' values, one per spec metric, matched by name. A spec metric
	// with no observation counts as missing data.
	Observations []Observation
	// RequestsWaiting is the total of the requests queued in the Ready pods (the
	// requestsWaiting signal, Snapshot.RequestsWaiting), whether or not a spec metric targets
	// it: capacity learning reads saturation from it. Without data nothing is learnt.
	RequestsWaiting Observation
	// BothColorsReady is true when both colors have Ready pods (a rollout, a rolled-back
	// candidate draining, the previous color kept warm after a promotion): the load per Ready
	// pod is then not what a serving replica carries, and a candidate's latency is mixed in, so
	// nothing is learnt.
	BothColorsReady bool
	// Revision is the stable revision serving (status.stable.revision): a capacity learnt on
	// another one is forgotten. Empty: unknown, what was learnt is kept.
	Revision string
	// TTFTP95 and ITLP95 are the p95 time to first token and inter-token latency of the Ready
	// pods over the serving window (ServingWindow), in seconds, for capacity learning with a
	// latency SLO and for spec.autoscaling.slo (the controller queries them only then).
	TTFTP95, ITLP95 Observation
	// RequestsRunning is the total of the requests running in the Ready pods' engines
	// (vllm:num_requests_running, sglang:num_running_reqs), for spec.autoscaling.slo's batch
	// guard with BatchLimit. Without data (or without BatchLimit) there is no guard.
	RequestsRunning Observation
	// BatchLimit is the most requests one pod's engine runs at once (vLLM's --max-num-seqs,
	// SGLang's --max-running-requests; see BatchLimitOf), 0 when unknown. Beyond it requests
	// queue, a cliff that shows in no latency before it is crossed.
	BatchLimit int32
	// KVCacheUsage is the KV-cache use averaged over the Ready pods, 0..1
	// (vllm:kv_cache_usage_perc, sglang:token_usage), for spec.autoscaling.slo's KV guard: at 1
	// the engine admits nothing more and requests queue, the batch limit's cliff for requests
	// whose sequences fill the cache first (long prompts, long outputs). Without data there is
	// no guard.
	KVCacheUsage Observation
	// Load is the token work of the Ready pods (metrics.TokenWork: prompt and generated tokens
	// per second over the serving window, in replicas' worth of a nominal replica), with its
	// trend when spec.autoscaling.projectionHorizon is set, for spec.autoscaling.slo.
	Load Observation
	// Served is the requests the Ready pods finished per second over the serving window
	// (rate of vllm:request_success_total summed), for spec.autoscaling.slo's fast path: with the
	// queue's growth since the last pass (status.autoscaling.queue) it is the rate arriving.
	// Without data the fast path doubles the Ready replicas instead.
	Served Observation
	// ServingWindow is the window of the latencies and the load (ServingWindow of the scrape
	// interval): the slo learns once per window. 0 means one minute.
	ServingWindow time.Duration
	// Previous is the last status (nil on the first pass). Its recommendations and events carry
	// the stabilization windows and rate limits across passes and restarts.
	Previous *v1alpha1.AutoscalingStatus
	// Capacity is how many more pods the cluster allows: capacity.Fit called with
	// FitInput.Replicas = PodsFor(Current) (and Want = PodsFor(maxReplicas) - PodsFor(Current),
	// say). Nil or MaxAdditional == capacity.Unlimited (-1) when unknown or unlimited; leave it
	// nil on clusters with a node autoscaler, or pass a Fit computed on quotas only.
	Capacity *capacity.FitResult
	// PodsFor is the number of pods both colors run for a total replica count: during a
	// rollout the candidate is sized for its next weight on top of the stable color's total,
	// and after a promotion the previous color is kept warm, so one more replica of the total
	// may cost more than one pod's GPUs. It must not decrease as the total grows. Nil means
	// the total itself (no rollout).
	PodsFor func(total int32) int32
}

// Output is Decide's verdict.
type Output struct {
	// Desired is the total replica count to run across both colors.
	Desired int32
	// Status is the new autoscaling status to write.
	Status v1alpha1.AutoscalingStatus
	// Limited is true when Desired was clamped by the bounds or by GPU capacity or quota.
	Limited bool
	// LimitedReason is v1alpha1.ReasonBoundsLimited, ReasonGPUCapacityLimited,
	// ReasonGPUQuotaLimited, or ReasonWithinBounds when not Limited (for ScalingLimited).
	LimitedReason string
	// LimitedMessage explains the clamp.
	LimitedMessage string
	// MetricsAvailable is false when some metric had no data: with none, the count is held;
	// with some, scaling down is held (for the MetricsAvailable condition).
	MetricsAvailable bool
	// MetricsMessage explains MetricsAvailable.
	MetricsMessage string
	// Held says what held the count back from the metrics' recommendation, if anything
	// (stabilization window, rate limit, cold start), for logs.
	Held string
	// Unserved, when the total is 0, says why requests may wait with no pod to serve them: a
	// metric that sees load without pods (SeesLoadWithoutPods) reads above 0, or none of them
	// has data. Empty when the total is above 0 or such a metric reads 0 (for Ready).
	Unserved string
	// Event is set when the count changes.
	Event *Event
	// RequeueAfter is when to evaluate again (the spec's interval).
	RequeueAfter time.Duration
}

// Event is a Kubernetes Event to record beside a scaling change.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Reason is ReasonScaledUp or ReasonScaledDown.
	Reason string
	// Message, e.g. "3 -> 5 replicas: gpuUtilization 91 > target 70".
	Message string
}
