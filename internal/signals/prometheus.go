// Package signals gathers what the autoscaler decides on. Each way of measuring is a Source
// (in the style of KEDA's scalers): the built-in signals, one grouped PromQL query per signal
// for all ModelServers (SnapshotCache); a custom PromQL query; the resource and external
// metrics APIs; the latency SLOs. Sources builds a ModelServer's sources from its autoscaling
// spec, and Cache runs them off the reconcile workers. The decisions are package autoscale's,
// which has no client.
package signals

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/metrics"
)

// PromQL of the built-in signals. Each is one query for every pod (or pool) of every
// ModelServer, grouped by pod (or pool); autoscale.Snapshot.Observe picks a ModelServer's pods in memory.
//
// A series is filed under the pod its scrape target is (namespace and pod, the labels
// Prometheus sets from the target and that a target's own exposition cannot override with
// honorLabels: false), except GPU utilization from the GPU exporter (see GPUExporter), whose
// exported_namespace and exported_pod name the workload holding the GPU. Every other series'
// exported_* labels are what a pod wrote in its own exposition: a tenant's pod could name
// another tenant's pod there, so they are never read.
const (
	// QueryGPUUtilization averages NVIDIA DCGM's GPU utilization (percent) per pod over the
	// pod's GPUs. dcgm-exporter labels the workload pod as pod/namespace when scraped with
	// honorLabels, and as exported_pod/exported_namespace otherwise (pod is then the exporter's
	// own pod); Snapshot reads exported_* on the exporter's series only (GPUExporter), which
	// the job label in the grouping helps tell apart.
	QueryGPUUtilization = `avg by (job, namespace, pod, exported_namespace, exported_pod) (DCGM_FI_DEV_GPU_UTIL)`
	// QueryRequestsWaiting sums the requests queued in each pod over its engines (vLLM's
	// vllm:num_requests_waiting, else SGLang's sglang:num_queue_reqs; a pod serves one of them).
	QueryRequestsWaiting = `sum by (namespace, pod) (vllm:num_requests_waiting) or sum by (namespace, pod) (sglang:num_queue_reqs)`
	// QueryRequestsRunning sums the requests running in each pod's engines (vLLM's
	// vllm:num_requests_running, else SGLang's sglang:num_running_reqs), for the SLO's batch
	// guard.
	QueryRequestsRunning = `sum by (namespace, pod) (vllm:num_requests_running) or sum by (namespace, pod) (sglang:num_running_reqs)`
	// QueryKVCacheUsage is each pod's KV-cache use, 0..1, averaged over its engines: vLLM's
	// vllm:kv_cache_usage_perc (a fraction despite its name), its name before v0.10
	// (vllm:gpu_cache_usage_perc), else SGLang's sglang:token_usage.
	QueryKVCacheUsage = `avg by (namespace, pod) (vllm:kv_cache_usage_perc) or avg by (namespace, pod) (vllm:gpu_cache_usage_perc) or avg by (namespace, pod) (sglang:token_usage)`

	// QueryPoolQueueSize is each InferencePool's average queue per pod as its endpoint picker
	// reports it, labelled name=<pool> (the Gateway API Inference Extension's name, else
	// llm-d's newer one). The endpoint picker runs in its pool's namespace: the target's.
	QueryPoolQueueSize = `avg by (namespace, name) (inference_pool_average_queue_size) or avg by (namespace, name) (llm_d_epp_average_queue_size)`
	// QueryPoolSaturation is each InferencePool's saturation, 0..1, from the endpoint picker's
	// flow controller, labelled inference_pool=<pool> (older releases: name=<pool>).
	QueryPoolSaturation = `max by (namespace, inference_pool, name) (inference_extension_flow_control_pool_saturation) or max by (namespace, inference_pool, name) (llm_d_epp_flow_control_pool_saturation)`
	// QueryObjectiveRunning is each model name's running requests summed over the endpoint
	// pickers of a namespace (inference_objective_running_requests, called
	// inference_model_running_requests before InferenceObjective, and llm_d_epp_request_running
	// by the endpoint picker since it moved to llm-d's router: Inference Extension v1.6 ships
	// none of its own).
	QueryObjectiveRunning = `sum by (namespace, model_name) (inference_objective_running_requests) or sum by (namespace, model_name) (inference_model_running_requests) or sum by (namespace, model_name) (llm_d_epp_request_running)`
)

// GPUExporter tells the GPU exporter's series from the others by the labels its scrape target
// has: only on its series are exported_namespace and exported_pod the workload's. An empty
// field is not checked; with both empty no series is the exporter's and exported_* labels are
// never read (an exporter scraped with honorLabels: true needs none).
type GPUExporter struct {
	// Namespace is the namespace label of the exporter's targets: the namespace it runs in,
	// which the Prometheus Operator sets from the scraped pod or Service, and which a tenant's
	// pod cannot have unless it runs there.
	Namespace string
	// Job is the job label of the exporter's targets (the Prometheus Operator sets it from the
	// Service's name, which a tenant can choose for a Service of its own: prefer Namespace).
	Job string
}

// DefaultGPUExporter is dcgm-exporter as NVIDIA's GPU Operator runs it and as
// config/prometheus and the chart scrape it: in namespace gpu-operator.
var DefaultGPUExporter = GPUExporter{Namespace: "gpu-operator"}

// owns says whether a series with labels l comes from the exporter.
func (e GPUExporter) owns(l map[string]string) bool {
	if e.Namespace == "" && e.Job == "" {
		return false
	}
	return (e.Namespace == "" || l["namespace"] == e.Namespace) && (e.Job == "" || l["job"] == e.Job)
}

// podOf reads the pod a series describes. On the exporter's series, each of the pod's
// namespace and name is read from its exported_ label whenever the series has it, else from
// the plain label, independently of each other: Prometheus renames only the exporter's labels
// that collide with a target label, so dcgm-exporter scraped with a namespace target label but
// no pod target label gives exported_namespace (the workload's) beside pod (the workload's
// too), and namespace is then the exporter's own. Any other series is its target's pod.
func (e GPUExporter) podOf(l map[string]string) autoscale.PodKey {
	if !e.owns(l) {
		return targetPod(l)
	}
	k := targetPod(l)
	if ns := l["exported_namespace"]; ns != "" {
		k.Namespace = ns
	}
	if p := l["exported_pod"]; p != "" {
		k.Name = p
	}
	return k
}

// Queries are the queries of the built-in signals; an empty query is not run (its metric then
// has no data).
type Queries struct {
	// GPUUtilization returns per-pod GPU utilization in percent.
	GPUUtilization string
	// RequestsWaiting returns per-pod queued requests.
	RequestsWaiting string
	// RequestsRunning returns per-pod running requests.
	RequestsRunning string
	// KVCacheUsage returns per-pod KV-cache use, 0..1.
	KVCacheUsage string
	// PoolQueueSize returns per-InferencePool average queue per pod.
	PoolQueueSize string
	// PoolSaturation returns per-InferencePool saturation, 0..1.
	PoolSaturation string
	// ObjectiveRunning returns per-model-name running requests.
	ObjectiveRunning string
	// GPUExporter tells which GPUUtilization series may name the workload in exported_*.
	GPUExporter GPUExporter
}

// DefaultQueries are the vLLM/SGLang, DCGM and endpoint picker queries above, with the GPU
// Operator's dcgm-exporter.
func DefaultQueries() Queries {
	return Queries{
		GPUUtilization: QueryGPUUtilization, RequestsWaiting: QueryRequestsWaiting, RequestsRunning: QueryRequestsRunning,
		KVCacheUsage: QueryKVCacheUsage, PoolQueueSize: QueryPoolQueueSize, PoolSaturation: QueryPoolSaturation, ObjectiveRunning: QueryObjectiveRunning,
		GPUExporter: DefaultGPUExporter,
	}
}

// SnapshotCache fetches the built-in signals for all ModelServers at most once per Interval and
// shares the snapshot between reconciles. It is safe for concurrent use: the reconcile that finds
// the snapshot stale refreshes it without holding the lock, the others meanwhile go on with the
// previous snapshot (and wait only for the very first one), so a slow Prometheus never holds
// every reconcile worker.
type SnapshotCache struct {
	querier  metrics.Querier
	queries  Queries
	interval time.Duration

	mu       sync.Mutex
	snap     *autoscale.Snapshot
	err      error
	fetching chan struct{} // closed when the refresh under way ends; nil when none is
}

// NewSnapshotCache returns a cache running signals on querier at most once per interval
// (DefaultInterval when not positive; use the shortest spec.autoscaling.interval you serve).
func NewSnapshotCache(querier metrics.Querier, queries Queries, interval time.Duration) *SnapshotCache {
	if interval <= 0 {
		interval = autoscale.DefaultInterval
	}
	return &SnapshotCache{querier: querier, queries: queries, interval: interval}
}

// SkipEndpointPicker stops querying the endpoint picker's signals, for a cluster that serves no
// InferencePools (no picker reports on a pool there). Call it before the first Get.
func (c *SnapshotCache) SkipEndpointPicker() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries.PoolQueueSize, c.queries.PoolSaturation, c.queries.ObjectiveRunning = "", "", ""
}

// Get returns the snapshot, refreshing it when it is older than the interval at now. The
// snapshot is never nil: a signal whose query failed is kept as failed (Observe reports
// metrics.Error for it) and the error says which ones failed. A failed refresh is not retried
// before the next interval, so an outage does not multiply queries.
func (c *SnapshotCache) Get(ctx context.Context, now time.Time) (*autoscale.Snapshot, error) {
	c.mu.Lock()
	if c.snap != nil && !now.Before(c.snap.At) && now.Sub(c.snap.At) < c.interval {
		defer c.mu.Unlock()
		return c.snap, c.err
	}
	if wait := c.fetching; wait != nil {
		if c.snap != nil {
			defer c.mu.Unlock()
			return c.snap, c.err
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.snap, c.err
	}
	done := make(chan struct{})
	c.fetching = done
	sig := c.queries
	c.mu.Unlock()
	snap, err := Fetch(ctx, c.querier, sig, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snap, c.err, c.fetching = snap, err, nil
	close(done)
	return snap, err
}

// Fetch runs each signal's query once, at now, all at once, and indexes the series by pod.
func Fetch(ctx context.Context, q metrics.Querier, sig Queries, now time.Time) (*autoscale.Snapshot, error) {
	queries := []struct {
		metric, query string
		key           func(map[string]string) autoscale.PodKey
	}{
		{autoscale.MetricGPUUtilization, sig.GPUUtilization, sig.GPUExporter.podOf},
		{autoscale.MetricRequestsWaiting, sig.RequestsWaiting, targetPod},
		{autoscale.SignalRequestsRunning, sig.RequestsRunning, targetPod},
		{autoscale.MetricKVCacheUsage, sig.KVCacheUsage, targetPod},
		{autoscale.SignalPoolQueueSize, sig.PoolQueueSize, keyOf("name")},
		{autoscale.SignalPoolSaturation, sig.PoolSaturation, keyOf("inference_pool", "name")},
		{autoscale.SignalObjectiveRunning, sig.ObjectiveRunning, keyOf("model_name")},
	}
	data := make([]*autoscale.SignalValues, len(queries))
	var wg sync.WaitGroup
	for i, x := range queries {
		if x.query == "" {
			continue
		}
		wg.Go(func() {
			series, err := q.Vector(ctx, x.query, now)
			if err != nil {
				data[i] = &autoscale.SignalValues{Err: fmt.Errorf("query %s: %w", x.metric, err)}
				return
			}
			data[i] = &autoscale.SignalValues{ByPod: index(series, x.key)}
		})
	}
	wg.Wait()
	values := map[string]autoscale.SignalValues{}
	var errs []error
	for i, x := range queries {
		if data[i] == nil {
			continue
		}
		values[x.metric] = *data[i]
		if data[i].Err != nil {
			errs = append(errs, data[i].Err)
		}
	}
	return autoscale.NewSnapshot(now, values), errors.Join(errs...)
}

// index maps series to the pod (or pool, or model name) key names, and averages series that
// land on the same key. NaN and ±Inf values are skipped: no value is not zero.
func index(series []metrics.Series, key func(map[string]string) autoscale.PodKey) map[autoscale.PodKey]float64 {
	sums := make(map[autoscale.PodKey]float64, len(series))
	counts := make(map[autoscale.PodKey]int, len(series))
	for _, s := range series {
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			continue
		}
		k := key(s.Labels)
		if k.Name == "" || k.Namespace == "" {
			continue
		}
		sums[k] += s.Value
		counts[k]++
	}
	for k, n := range counts {
		if n > 1 {
			sums[k] /= float64(n)
		}
	}
	return sums
}

// targetPod is the pod a series' scrape target is: its namespace and pod labels.
var targetPod = keyOf("pod")

// keyOf reads a series' namespace (the target's) and its name from the first of names it has.
func keyOf(names ...string) func(map[string]string) autoscale.PodKey {
	return func(l map[string]string) autoscale.PodKey {
		k := autoscale.PodKey{Namespace: l["namespace"]}
		for _, n := range names {
			if v := l[n]; v != "" {
				k.Name = v
				break
			}
		}
		return k
	}
}
