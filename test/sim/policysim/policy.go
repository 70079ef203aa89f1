// Package policysim replays a request trace in virtual time against the shared GPU-replica model
// (package fleet) once per autoscaling policy, and measures each: SLO minutes, GPU-hours, scale
// events, oscillations. modelship's policy is package autoscale's Decide itself; the peers
// (HPA on GPU utilization, KEDA's Prometheus scaler feeding HPA) are each written from their
// documented algorithm in their own file. Every policy is measured against the offline optimum
// (Optimum: the fewest replicas meeting each minute's SLO, found by simulating the minute).
package policysim

import "time"

// Signals is what a policy sees at one evaluation: the metrics as Prometheus shows them at its
// last scrape (instant gauges as scraped, counters as rate over one minute).
type Signals struct {
	// Now is the virtual time since the start of the run.
	Now time.Duration
	// Pods is the replica count asked for (pods that exist and are not terminating).
	Pods int32
	// Ready is the number of those pods whose model is loaded (Ready, serving).
	Ready int32
	// GPUUtilization is DCGM_FI_DEV_GPU_UTIL averaged over the Ready pods, in percent; HasGPU
	// is false when no Ready pod reported (an outage, or none Ready).
	GPUUtilization float64
	HasGPU         bool
	// Waiting is the total of vllm:num_requests_waiting; Running of vllm:num_requests_running.
	Waiting, Running float64
	// KVCacheUsage is vllm:kv_cache_usage_perc averaged over the Ready pods, 0..1.
	KVCacheUsage float64
	// PromptTPS and GeneratedTPS are rate(vllm:prompt_tokens_total[1m]) and
	// rate(vllm:generation_tokens_total[1m]) summed over the pods.
	PromptTPS, GeneratedTPS float64
	// Served is rate(vllm:request_success_total[1m]) summed over the pods: requests per second.
	Served float64
	// NoRates is true at the first scrape: a rate over one sample is no result in PromQL (not
	// 0), and a 0 there would read as a load rising from nothing over the first minutes.
	NoRates bool
	// TTFTP95 and ITLP95 are the p95 time to first token and inter-token latency in seconds of
	// the requests observed in the minute before the scrape, as histogram_quantile over a 1m
	// rate of vLLM's buckets reads them; HasLatency is false when none was (no traffic, or
	// the first scrape).
	TTFTP95, ITLP95 float64
	HasLatency      bool
	// MetricsMissing is true during an outage of the pods' metrics: queries return empty
	// results. Each policy reads that as its documented behaviour does (modelship and HPA: no
	// data, hold; KEDA's Prometheus scaler with its default ignoreNullValues: 0). During a NaN
	// outage (Outage.NaN) the gauges and rates are NaN instead, read the same way by each.
	MetricsMissing bool
	// PerPod are the serving pods' own gauges (vllm:kv_cache_usage_perc,
	// vllm:num_requests_waiting and vllm:num_requests_running per pod), for the policies that
	// judge each replica.
	PerPod []PodSignals
}

// PodSignals are one serving pod's gauges as scraped.
type PodSignals struct {
	Name                           string
	KVCacheUsage, Waiting, Running float64
}

// Policy decides the total replica count.
type Policy interface {
	// Name is the policy's label in reports ("hpa-gpu70", "modelship", ...).
	Name() string
	// Interval is how often Decide runs.
	Interval() time.Duration
	// Decide returns the replica count to run from now on.
	Decide(s Signals) int32
}
